"""The host worker's end, as its release finds it (harness/trial/hostworker.py;
its ready line and records are read in test_worker_records.py).

Real processes stand in for the worker here (its release only signals, waits and
reads /proc); the real worker is killed mid-trial in test_host_worker_vm.py. The OOM
case runs a real memory hog in a real cgroup under a real limit (integration).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.trial.hostworker import (
    HostWorkerProcess,
    _process_release,
    worker_category,
    worker_record,
)
from host.cgroups import Cgroup, detect, spawn_in_cgroup
from host.cgroups.v1 import V1Cgroup

MIB = 1 << 20
SHA = "ab" * 32


def _worker(popen: subprocess.Popen[bytes], tmp_path: Path, cgroup: Cgroup) -> HostWorkerProcess:
    socket = tmp_path / "api.sock"
    socket.write_bytes(b"")  # the worker's socket file outlives a killed worker
    return HostWorkerProcess(
        None, popen.pid, cgroup, socket, tmp_path / "r.jsonl", SHA, 0, time.monotonic()
    )


def _unread_cgroup(tmp_path: Path) -> Cgroup:
    """A cgroup handle whose memory directory holds no files: every reading is unread
    (the OOM count among them)."""
    (tmp_path / "memory").mkdir(exist_ok=True)
    return V1Cgroup("worker-unit", {"memory": tmp_path / "memory"})


def _wait_gone(popen: subprocess.Popen[bytes]) -> None:
    """Until the process is a zombie or gone, without reaping it (the release must)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{popen.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)
    raise AssertionError("the stand-in worker did not end")


async def _release(worker: HostWorkerProcess, popen: subprocess.Popen[bytes]) -> tuple[str, str]:
    process, socket = await _process_release(popen, worker)()
    return process.status, socket.status


async def test_a_running_worker_stopped_by_its_release_is_ok(tmp_path: Path) -> None:
    popen = subprocess.Popen(["sleep", "60"])
    worker = _worker(popen, tmp_path, _unread_cgroup(tmp_path))
    assert await _release(worker, popen) == ("confirmed", "confirmed")
    assert worker.exit_status is None
    assert popen.returncode == -signal.SIGTERM  # the release stopped it
    assert worker_category(worker, None) == "ok"
    assert not worker.socket.exists()


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["sleep", "60"], -signal.SIGKILL),  # killed from outside
        (["true"], 0),  # a clean exit nobody asked for
        (["false"], 1),  # an error exit
    ],
)
async def test_a_worker_gone_before_its_release_is_worker_exited(
    tmp_path: Path, argv: list[str], status: int
) -> None:
    popen = subprocess.Popen(argv)
    if status == -signal.SIGKILL:
        os.kill(popen.pid, signal.SIGKILL)
    _wait_gone(popen)
    worker = _worker(popen, tmp_path, _unread_cgroup(tmp_path))
    assert await _release(worker, popen) == ("confirmed", "confirmed")
    assert worker.exit_status == status
    assert worker_category(worker, None) == "worker_exited"
    assert worker_category(worker, 0) == "worker_exited"
    record = worker_record(worker, ())
    assert (record.category, record.oom_kills, record.placement) == (
        "worker_exited",
        None,
        "host",
    )


def test_an_oom_kill_names_the_end_whatever_else_is_known(tmp_path: Path) -> None:
    popen = subprocess.Popen(["true"])
    popen.wait()
    worker = _worker(popen, tmp_path, _unread_cgroup(tmp_path))
    assert worker_category(worker, 1) == "oom_killed"  # release has not run: still named
    worker.exit_status = -signal.SIGKILL
    assert worker_category(worker, 2) == "oom_killed"
    assert worker_category(worker, None) == "worker_exited"


@pytest.fixture
def worker_cgroup() -> Iterator[Cgroup]:
    """A real cgroup named as the trial names its worker's, removed afterwards."""
    cgroup = detect().create(f"worker-t{uuid.uuid4().hex[:12]}")
    try:
        yield cgroup
    finally:
        cgroup.kill_members()
        cgroup.remove()


HOG = (
    "import sys\nb = []\n"
    "for _ in range(512):\n    b.append(b'x' * (1 << 20))\n"
    "sys.exit(3)\n"  # reached only if 512 MiB fit: the limit did not hold
)


@pytest.mark.integration
async def test_a_worker_oom_killed_in_its_cgroup_is_oom_killed(
    tmp_path: Path, worker_cgroup: Cgroup
) -> None:
    """The kernel's OOM killer ends the stand-in under its no-swap limit; the record
    reads the kill from the cgroup (memory.events / memory.oom_control) and names it."""
    worker_cgroup.set_memory_limit(64 * MIB)
    popen = spawn_in_cgroup(worker_cgroup, [sys.executable, "-c", HOG])
    _wait_gone(popen)
    worker = _worker(popen, tmp_path, worker_cgroup)
    assert await _release(worker, popen) == ("confirmed", "confirmed")
    assert worker.exit_status == -signal.SIGKILL
    record = worker_record(worker, ())
    assert record.oom_kills is not None and record.oom_kills >= 1
    assert record.category == "oom_killed"


@pytest.mark.integration
async def test_a_worker_killed_in_its_cgroup_without_oom_is_worker_exited(
    tmp_path: Path, worker_cgroup: Cgroup
) -> None:
    """The control for the OOM case: same cgroup and limit, a SIGKILL from outside; the
    cgroup reads zero OOM kills, so the record says the worker exited."""
    worker_cgroup.set_memory_limit(64 * MIB)
    popen = spawn_in_cgroup(worker_cgroup, ["sleep", "60"])
    os.kill(popen.pid, signal.SIGKILL)
    _wait_gone(popen)
    worker = _worker(popen, tmp_path, worker_cgroup)
    assert await _release(worker, popen) == ("confirmed", "confirmed")
    record = worker_record(worker, ())
    assert (record.category, record.oom_kills) == ("worker_exited", 0)


def test_an_early_exit_outranks_what_its_records_say(tmp_path: Path) -> None:
    """A worker cut off mid-write leaves damaged records: the exit is the cause."""
    popen = subprocess.Popen(["true"])
    popen.wait()
    worker = _worker(popen, tmp_path, _unread_cgroup(tmp_path))
    assert worker_category(worker, None, "records_invalid") == "records_invalid"
    worker.exit_status = 0
    assert worker_category(worker, None, "records_invalid") == "worker_exited"
    assert worker_category(worker, 1, "records_invalid") == "oom_killed"
