"""Teardown evidence without a guest: each release reports what it actually observed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from host.cgroups import Cgroup
from host.vm import QemuVm, VmSpec, qemu
from receipts.records.vm import QemuEnd


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


# ---- how QEMU ended (`qemu_end`): read from our own waitpid in stop() ------------------


def _python(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


async def test_a_process_killed_by_our_sigkill_ended_by_signal_9(scratch_root: Path) -> None:
    """QMP cannot arrive (no socket): SIGKILL, and the end says so. Mutation control:
    `QemuEnd.of_returncode` dropped from stop() leaves None."""
    vm = bare_vm(scratch_root)
    assert vm.qemu_end() is None  # nothing to read before stop()
    vm.process = subprocess.Popen(["sleep", "300"])
    await vm.stop(deadline_s=1.0)
    assert vm.qemu_end() == QemuEnd(stop="sigkill", exit_code=None, signal=9)


async def test_a_process_that_quit_on_qmp_ended_with_its_exit_status(
    scratch_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QMP's `quit` stands in as a SIGUSR1 on which the process exits 0: the end is the
    status read by waitpid after `quit`, not our kill. Mutation control: recording the
    stop as "sigkill" in the qmp_quit branch fails here."""
    vm = bare_vm(scratch_root)
    vm.scratch = tmp_path  # where the QMP socket would be
    vm.process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))\n"
            "print('ready', flush=True)\n"
            "time.sleep(300)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert vm.process.stdout is not None
    assert vm.process.stdout.readline() == b"ready\n"  # the handler is in place
    vm.process.stdout.close()

    async def quit_by_signal(_socket: Path, _timeout_s: float) -> bool:
        assert vm.process is not None
        vm.process.send_signal(signal.SIGUSR1)
        return True

    monkeypatch.setattr(qemu, "qmp_quit", quit_by_signal)
    result = await vm.stop(deadline_s=10.0)
    assert (result.status, result.evidence) == ("confirmed", "process_reaped")
    assert vm.qemu_end() == QemuEnd(stop="qmp_quit", exit_code=0, signal=None)
    vm.scratch = None  # tmp_path is pytest's to remove


@pytest.mark.parametrize(
    ("code", "end"),
    [
        ("import sys; sys.exit(3)", QemuEnd(stop="already_exited", exit_code=3, signal=None)),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
            QemuEnd(stop="already_exited", exit_code=None, signal=15),
        ),
    ],
)
async def test_a_process_that_ended_by_itself_is_read_as_it_ended(
    scratch_root: Path, code: str, end: QemuEnd
) -> None:
    """Ended before stop() (it failed, or something else killed it): its own status or
    signal, and `already_exited`, never our kill. Mutation control: reading the end as
    `of_returncode(stop, abs(code))` turns the SIGTERM into exit 15."""
    vm = bare_vm(scratch_root)
    vm.process = _python(code)
    vm.process.wait(timeout=30)
    await vm.stop(deadline_s=1.0)
    assert vm.stop_method == "already_exited"
    assert vm.qemu_end() == end


async def test_a_process_not_reaped_in_time_has_no_end(
    scratch_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Still present after the kill deadline (waitpid never returned a status): no end,
    never a guessed one. Mutation control: setting the end before the check fails here."""
    vm = bare_vm(scratch_root)
    vm.process = subprocess.Popen(["sleep", "300"])

    async def never(_process: subprocess.Popen[bytes], _deadline_s: float) -> None:
        return None

    monkeypatch.setattr(qemu, "wait_exit", never)
    try:
        result = await vm.stop(deadline_s=0.1)
        assert (result.status, result.evidence) == ("failed", "still_present")
        assert vm.qemu_end() is None
    finally:
        vm.process.kill()
        vm.process.wait(timeout=10)


async def test_a_qemu_never_started_has_no_end(scratch_root: Path) -> None:
    vm = bare_vm(scratch_root)
    await vm.cleanup()
    assert vm.qemu_end() is None
