"""Teardown evidence without a guest: each release reports what it actually observed."""

from __future__ import annotations

import socket
import subprocess
import uuid
from pathlib import Path

from host.cgroups import Cgroup
from host.vm import QemuVm, VmSpec


class NoImage:
    vmlinux = Path("/nonexistent/vmlinux")
    initramfs = Path("/nonexistent/initramfs")
    base = Path("/nonexistent/base.qcow2")


def bare_vm(scratch_root: Path, cgroup: Cgroup | None = None) -> QemuVm:
    return QemuVm(
        VmSpec(
            tag=uuid.uuid4().hex[:16],
            image=NoImage(),
            cgroup=cgroup,  # type: ignore[arg-type]
            scratch_root=scratch_root,
            accelerator="tcg",
            accelerator_reason="forced_by_flag",
        )
    )


async def test_nothing_acquired_means_not_acquired_for_each_resource(scratch_root: Path) -> None:
    results = await bare_vm(scratch_root).cleanup()
    assert [(r.resource, r.status, r.evidence) for r in results] == [
        ("qemu_process", "not_acquired", "nothing_to_release"),
        ("forwarded_port", "not_acquired", "nothing_to_release"),
        ("overlay_disk", "not_acquired", "nothing_to_release"),
        ("ssh_keys", "not_acquired", "nothing_to_release"),
        ("scratch_dir", "not_acquired", "nothing_to_release"),
    ]


async def test_a_port_still_accepting_is_reported_failed(scratch_root: Path) -> None:
    vm = bare_vm(scratch_root)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        vm.port = holder.getsockname()[1]
        results = {r.resource: r for r in await vm.cleanup()}
    assert (results["forwarded_port"].status, results["forwarded_port"].evidence) == (
        "failed",
        "still_present",
    )


async def test_a_file_that_cannot_be_removed_is_reported_failed(
    scratch_root: Path, tmp_path: Path
) -> None:
    vm = bare_vm(scratch_root)
    blocker = tmp_path / "overlay.qcow2"
    blocker.mkdir()  # unlink() fails on a directory: the release must say so, not raise
    vm.overlay = blocker
    results = {r.resource: r for r in await vm.cleanup()}
    assert (results["overlay_disk"].status, results["overlay_disk"].evidence) == (
        "failed",
        "still_present",
    )


async def test_a_process_that_ignores_qmp_is_killed_and_reaped(scratch_root: Path) -> None:
    vm = bare_vm(scratch_root)
    vm.process = subprocess.Popen(["sleep", "300"])  # no QMP socket: quit cannot arrive
    result = await vm.stop(deadline_s=1.0)
    assert (result.status, result.evidence) == ("confirmed", "process_reaped")
    assert vm.stop_method == "sigkill"
    assert vm.process.returncode == -9
