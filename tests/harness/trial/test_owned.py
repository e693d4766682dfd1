"""Registrations go through their owner's declaration (receipts/ownership.py), the one
the audit requires cleanup receipts from.

Mutation control: with the `resource not in self.declared` check removed from
`Owner.register`, test_a_registration_outside_its_owners_declaration_is_refused fails.
"""

from __future__ import annotations

import asyncio
from typing import get_args

import pytest

from harness.trial.guestworker import GuestWorker
from harness.trial.hostworker import HostWorker
from harness.trial.owned import OwnedResources, Owner, UndeclaredResource
from host.release import CleanupResult
from host.vm import QemuBackend
from host.vm.libvirt_backend import LibvirtBackend
from receipts.ownership import GUEST_OWNS, TRIAL_OWNS, WORKER_OWNS
from receipts.records.cleanup import Resource
from receipts.vocabulary import Backend
from tests.host.vm.support import EXPECTED_RELEASE


def _release(resource: Resource) -> CleanupResult:
    return CleanupResult(resource, "confirmed", "file_absent", 1)


def test_a_registration_outside_its_owners_declaration_is_refused() -> None:
    owned = OwnedResources()

    async def release() -> tuple[CleanupResult, ...]:
        return (_release("cgroup"),)

    with pytest.raises(UndeclaredResource):
        owned.owner(WORKER_OWNS["guest"]).register("cgroup", release)  # the guest's cgroup
    assert asyncio.run(owned.release_all()) == []  # nothing was registered


def test_declared_registrations_release_in_reverse_order() -> None:
    owned = OwnedResources()
    registrations: tuple[tuple[Owner, Resource], ...] = (
        (owned.owner(TRIAL_OWNS), "trial_scratch"),
        (owned.owner(GUEST_OWNS["qemu"]), "cgroup"),
        (owned.owner(WORKER_OWNS["host"]), "worker_socket"),
    )
    for owner, resource in registrations:

        async def release(resource: Resource = resource) -> tuple[CleanupResult, ...]:
            return (_release(resource),)

        owner.register(resource, release)
    released = asyncio.run(owned.release_all())
    assert [r.resource for r in released] == ["worker_socket", "cgroup", "trial_scratch"]


def test_a_guest_releases_its_own_qemu_early_not_the_latest() -> None:
    # the verification guest may start beside the agent's: releasing the agent's QEMU
    # before verification must leave the verifier's running
    owned = OwnedResources()
    agent, verifier = owned.owner(GUEST_OWNS["qemu"]), owned.owner(GUEST_OWNS["qemu"])
    stopped: list[str] = []
    for name, owner in (("agent", agent), ("verifier", verifier)):

        async def release(name: str = name) -> tuple[CleanupResult, ...]:
            stopped.append(name)
            return (_release("qemu_process"),)

        owner.register("qemu_process", release)
    asyncio.run(agent.release_early("qemu_process"))
    assert stopped == ["agent"]
    asyncio.run(owned.release_all())
    assert stopped == ["agent", "verifier"]


def test_each_backend_and_placement_owns_its_declaration() -> None:
    assert QemuBackend().owns == GUEST_OWNS["qemu"]
    assert LibvirtBackend().owns == GUEST_OWNS["libvirt"]
    assert HostWorker().owns == WORKER_OWNS["host"]
    assert GuestWorker().owns == WORKER_OWNS["guest"]


@pytest.mark.parametrize("backend", get_args(Backend))
def test_a_guests_declaration_is_what_its_releases_give(backend: Backend) -> None:
    """The VM stage registers the guest's cgroup and data disk; the VM's own release gives
    the rest (what the backend conformance tests require of a real release)."""
    released = {resource for resource, _ in EXPECTED_RELEASE[backend]}
    assert {"cgroup", "data_disk"} | released == set(GUEST_OWNS[backend])
