"""Memory budgets are hard, at both levels (real QEMU under TCG, real v1/v2 cgroup).

A guest process that allocates past guest RAM is killed by the guest's own OOM killer
and the VM lives on; a guest whose RAM exceeds QEMU's no-swap cgroup gets QEMU killed
by the host, and the VM record says `oom_killed` with the kill counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.trial.vmstage import VmHandle, vm_record
from host.cgroups import Cgroup
from host.image import GuestImage
from host.ssh import SshError
from tests.host.vm.test_qemu_integration import READY_DEADLINE_S, spec, started

pytestmark = pytest.mark.integration

# Touch every page (b"\x01" * n is written), so memory is really committed.
HOG = "python3 -c \"a = []\nwhile True: a.append(b'\\x01' * (32 << 20))\""


async def test_guest_oom_kills_the_process_and_the_vm_survives(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    vm_cgroup.set_memory_limit(2 << 30)  # room for a 512 MiB guest and QEMU itself
    async with started(spec(guest_image, vm_cgroup, scratch_root, memory_mib=512)) as vm:
        await vm.wait_ready(READY_DEADLINE_S)
        hog = await vm.exec(HOG, deadline_s=180)
        assert hog.exit_status != 0  # killed (signal) or exited non-zero, never "fine"
        alive = await vm.exec("echo alive", deadline_s=30)
        assert alive.stdout == b"alive\n"
        assert vm.alive()
    readings = vm_cgroup.read_memory()
    assert readings.oom_kills.state == "present" and readings.oom_kills.value == 0


async def test_qemu_over_its_cgroup_is_killed_and_recorded(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    vm_cgroup.set_memory_limit(640 << 20)  # below the 1 GiB guest: the host must kill QEMU
    async with started(spec(guest_image, vm_cgroup, scratch_root, memory_mib=1024)) as vm:
        await vm.wait_ready(READY_DEADLINE_S)
        with pytest.raises(SshError):
            await vm.exec(HOG, deadline_s=180)
        assert not vm.alive()
        handle = VmHandle(vm_cgroup, 640 << 20, 0, None, None, vm, None)
        record = vm_record(handle, "qemu_exited", load_profile("tiny"))
    assert record.category == "oom_killed"
    assert record.oom_kills is not None and record.oom_kills >= 1
