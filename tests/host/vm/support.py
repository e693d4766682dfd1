"""Helpers shared by the VM tests: a spec, a started VM of either backend, the teardown
evidence each backend must produce, and a check that libvirtd answers."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from host.cgroups import Cgroup
from host.vm import QemuBackend, VmBackend, VmSpec
from host.vm.guest import GuestVm
from host.vm.ports import probe_port
from receipts.vocabulary import Backend
from tests.host.vm.conftest import tag_processes

READY_DEADLINE_S = 180.0
"""Generous: on a 2-core host shared with compilers, boot-to-SSH took up to ~55 s."""
BackendName = Backend

EXPECTED_RELEASE: dict[BackendName, list[tuple[str, str]]] = {
    "qemu": [
        ("qemu_process", "process_reaped"),
        ("forwarded_port", "port_refusing"),
        ("overlay_disk", "file_absent"),
        ("ssh_keys", "file_absent"),
        ("scratch_dir", "directory_absent"),
    ],
    "libvirt": [
        ("libvirt_domain", "domain_absent"),
        ("qemu_process", "process_gone"),
        ("forwarded_port", "port_refusing"),
        ("overlay_disk", "file_absent"),
        ("ssh_keys", "file_absent"),
        ("scratch_dir", "directory_absent"),
    ],
}


def make_backend(name: BackendName) -> VmBackend:
    if name == "qemu":
        return QemuBackend()
    from host.vm.libvirt_backend import LibvirtBackend
    from host.vm.virtconn import VirtError, open_connection

    try:
        open_connection().close()
    except VirtError:
        # Not a skip: CI must run this suite (`make test` starts libvirtd first).
        pytest.fail("libvirtd does not answer on qemu:///system: run .ci/libvirtd-up")
    return LibvirtBackend()


def create_vm(name: BackendName, vm_spec: VmSpec) -> GuestVm:
    vm = make_backend(name).create(vm_spec)
    assert isinstance(vm, GuestVm)
    return vm


def spec(image: object, cgroup: Cgroup, scratch_root: Path, **changes: object) -> VmSpec:
    base = VmSpec(
        tag=uuid.uuid4().hex[:16],
        image=image,  # type: ignore[arg-type]
        cgroup=cgroup,
        scratch_root=scratch_root,
        accelerator="tcg",
        accelerator_reason="forced_by_flag",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def started(vm_spec: VmSpec, backend: VmBackend | None = None) -> AsyncIterator[GuestVm]:
    """Start a VM; release everything even if the test fails first."""
    vm = (backend or QemuBackend()).create(vm_spec)
    assert isinstance(vm, GuestVm)
    try:
        await vm.start()
        yield vm
    finally:
        await vm.cleanup()


def assert_torn_down(backend: BackendName, vm: GuestVm, results: tuple[object, ...]) -> None:
    got = [(r.resource, r.evidence, r.status) for r in results]  # type: ignore[attr-defined]
    assert got == [(res, ev, "confirmed") for res, ev in EXPECTED_RELEASE[backend]]
    for index, result in enumerate(results):
        result.to_record(index)  # type: ignore[attr-defined]
    assert tag_processes(vm.spec.tag) == []
    assert vm.port is not None and probe_port(vm.port) == "refusing"
    assert vm.scratch is not None and not vm.scratch.exists()
