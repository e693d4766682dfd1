"""The VM stage states the budgets that bind QEMU where it runs, or refuses the guest.

A real process in a real cgroup stands in for QEMU (the check reads /proc and the
cgroup files, not the VM); the VM tests run it on real QEMUs of both backends."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from harness.profiles import load_profile
from harness.trial.owned import OwnedResources
from harness.trial.vmstage import VmHandle, _acquire, _check_budgets_in_effect
from host.cgroups import Cgroup, detect, spawn_in_cgroup
from host.vm.backend import Vm
from host.vm.errors import VmError

pytestmark = pytest.mark.integration  # writes real cgroups


@dataclasses.dataclass
class FakeVm:
    pid: int | None

    def qemu_pid(self) -> int | None:
        return self.pid


@pytest.fixture
def budgeted() -> Iterator[tuple[Cgroup, subprocess.Popen[bytes]]]:
    cgroup = detect().create(f"tvmstage-{uuid.uuid4().hex[:8]}")
    try:
        cgroup.set_memory_limit(256 << 20)
        cgroup.set_cpu_quota(150_000, 100_000)
        cgroup.set_pids_limit(32)
        child = spawn_in_cgroup(cgroup, ["sleep", "60"])
        try:
            yield cgroup, child
        finally:
            child.kill()
            child.wait(timeout=5)
    finally:
        cgroup.kill_members()
        cgroup.remove()


def _handle(cgroup: Cgroup, **changes: Any) -> VmHandle:
    values = {
        "memory_limit": 256 << 20,
        "swap_limit": 0,
        "cpu_quota_millicores": 1500,
        "pids_limit": 32,
    }
    return VmHandle(cgroup, OwnedResources().owner(()), **(values | changes))


def test_budgets_in_effect_equal_the_declared_ones(
    budgeted: tuple[Cgroup, subprocess.Popen[bytes]],
) -> None:
    cgroup, child = budgeted
    memory_dir = _check_budgets_in_effect(cast(Vm, FakeVm(child.pid)), _handle(cgroup))
    assert memory_dir.name == cgroup.name
    assert (memory_dir / "cgroup.procs").read_text().split() == [str(child.pid)]


@pytest.mark.parametrize(
    "changes",
    [
        {"memory_limit": 512 << 20},
        {"swap_limit": None},
        {"cpu_quota_millicores": 2000},
        {"pids_limit": 64},
        {"pids_limit": None},
    ],
    ids=["memory", "swap", "cpu", "pids", "pids_unset"],
)
def test_a_budget_that_does_not_bind_qemu_refuses_the_guest(
    budgeted: tuple[Cgroup, subprocess.Popen[bytes]], changes: dict[str, Any]
) -> None:
    cgroup, child = budgeted
    with pytest.raises(VmError) as err:
        _check_budgets_in_effect(cast(Vm, FakeVm(child.pid)), _handle(cgroup, **changes))
    assert err.value.category == "cgroup_apply_failed"


def test_process_outside_the_budget_refuses_the_guest(
    budgeted: tuple[Cgroup, subprocess.Popen[bytes]],
) -> None:
    """A QEMU that is not in the trial cgroup (libvirt's, budgets not applied) is refused."""
    cgroup, _child = budgeted
    outside = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(VmError) as err:
            _check_budgets_in_effect(cast(Vm, FakeVm(outside.pid)), _handle(cgroup))
        assert err.value.category == "cgroup_apply_failed"
    finally:
        outside.kill()
        outside.wait(timeout=5)
    with pytest.raises(VmError) as err:
        _check_budgets_in_effect(cast(Vm, FakeVm(None)), _handle(cgroup))
    assert err.value.category == "qemu_start_failed"


def cpu_share(cgroup: Cgroup) -> str:
    """The cgroup's CPU weight as the kernel reads it (v1 cpu.shares, v2 cpu.weight)."""
    if cgroup.version == "v1":
        path: Path = cast(Any, cgroup)._dirs["cpu"] / "cpu.shares"
    else:
        path = cast(Any, cgroup)._path / "cpu.weight"
    return path.read_text().strip()


@pytest.mark.parametrize("yield_cpu", [False, True])
def test_a_verifier_beside_the_agent_takes_the_lowest_cpu_weight(
    tmp_path: Path, yield_cpu: bool
) -> None:
    owned = OwnedResources()
    owner = owned.owner(("cgroup", "data_disk"))
    tag = uuid.uuid4().hex[:16]
    try:
        handle, _disk = _acquire(
            load_profile("tiny"), tag, "verifier", tmp_path, owner, yield_cpu=yield_cpu
        )
        lowest = "2" if handle.cgroup.version == "v1" else "1"
        assert (cpu_share(handle.cgroup) == lowest) == yield_cpu
    finally:
        asyncio.run(owned.release_all())
