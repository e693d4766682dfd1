"""The guest's own memory budget: a process that allocates past guest RAM is killed by
the guest's OOM killer and the VM lives on (real QEMU under TCG). The host-side budget
(QEMU over its cgroup is killed, recorded as `oom_killed`) is in test_conformance.py,
run against both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from host.cgroups import Cgroup
from host.image import GuestImage
from tests.host.vm.support import READY_DEADLINE_S, spec, started

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
