"""The worker on the host, beside the VM (placement `host`, the default under TCG).

It runs in its own no-swap cgroup (the profile's worker limit), serves the OpenAI API
on a Unix socket in the trial's scratch, and dies with the orchestrator
(PR_SET_PDEATHSIG). The guest reaches that socket through exactly one channel, a QEMU
`guestfwd` (host/vm/cmdline.py); nothing else of the host is reachable from the guest.
The worker writes one closed record per request; the WorkerRecord summary is computed
here from them, so the totals are counts of what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from harness.profiles import Profile
from harness.trial.guestrecords import (
    NO_REFUSALS,
    GuestOutputInvalid,
    connection_refusals,
    read_request_lines,
)
from harness.trial.owned import Owner, cgroup_release
from harness.trial.worker import (
    Worker,
    WorkerEnd,
    WorkerLaunch,
    WorkerStageFailed,
    parse_ready_line,
    serve_args,
    summary_record,
)
from host.cgroups import Cgroup
from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.cgroups.spawn import spawn_in_cgroup
from host.procfs import process_running
from host.release import CleanupResult, remove_files
from host.runtime import GuestRuntime
from receipts.records import WorkerRecord, WorkerRequestRecord
from receipts.records.worker import ConnectionRefusals, WorkerCategory
from receipts.vocabulary import WorkerPlacement

PR_SET_PDEATHSIG = 1
READY_DEADLINE_S = 120.0
SOCKET_NAME = "api.sock"
"""The worker's socket in the trial's scratch: the host end of the guestfwd channel."""
STOP_DEADLINE_S = 10.0


@dataclass
class HostWorkerProcess:
    """The launched worker; built as soon as its process exists, so that its release
    can record what it found (the process already gone) wherever the trial ends."""

    process: asyncio.subprocess.Process | None
    popen_pid: int
    cgroup: Cgroup
    socket: Path
    records: Path
    model_sha256: str
    load_ms: int
    started: float
    exit_status: int | None = None
    """The worker's exit status as its release found it before signalling: not None
    means it had exited before the harness stopped it (killed, crashed, or a clean
    exit nobody asked for). Negative: the signal that ended it."""


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _process_release(
    popen: subprocess.Popen[bytes], worker: HostWorkerProcess
) -> Callable[[], Awaitable[tuple[CleanupResult, ...]]]:
    """Stop the worker and prove it gone. Before any signal, it asks whether the worker
    is still running: a worker that exited on its own is a failure of the worker stage
    (the agent only saw failed requests), and only this moment can tell it apart from
    the exit that the stop itself causes."""
    socket = worker.socket

    async def release() -> tuple[CleanupResult, ...]:
        began = time.monotonic()
        worker.exit_status = popen.poll()
        with contextlib.suppress(ProcessLookupError):
            popen.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(popen.wait, STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            popen.kill()
            await asyncio.to_thread(popen.wait)
        gone = not process_running(popen.pid)
        elapsed = int((time.monotonic() - began) * 1000)
        return (
            CleanupResult(
                "worker_process",
                "confirmed" if gone else "failed",
                "process_reaped" if gone else "still_present",
                elapsed,
            ),
            remove_files((socket,), "worker_socket"),
        )

    return release


async def start_host_worker(
    *,
    profile: Profile,
    gguf: Path,
    sha256: str,
    scratch: Path,
    tag: str,
    owner: Owner,
    client_flags: tuple[str, ...] = (),
) -> HostWorkerProcess:
    try:
        cgroup = detect().create(f"worker-{tag}")
    except (CgroupError, OSError):
        raise WorkerStageFailed("worker_exited") from None

    owner.register("cgroup", cgroup_release(cgroup))
    try:
        cgroup.set_memory_limit(profile.memory.worker_cgroup_limit)
    except (CgroupError, OSError):
        raise WorkerStageFailed("worker_exited") from None
    socket = scratch / SOCKET_NAME
    records = scratch / "worker-records.jsonl"
    argv = [
        sys.executable,
        "-I",
        "-m",
        "guest.worker",
        *serve_args(profile, str(gguf), sha256, str(records), client_flags=client_flags),
        "--socket",
        str(socket),
    ]
    started = time.monotonic()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    try:
        # Its own session, as QEMU's (host/vm/process.py): a Ctrl-C at the terminal (SIGINT
        # to the foreground process group) reaches the orchestrator, which cancels the
        # trial and stops the worker itself, rather than killing the worker first.
        popen = spawn_in_cgroup(
            cgroup,
            argv,
            then=_die_with_parent,
            stdout=-1,
            stderr=-3,
            env=env,
            start_new_session=True,
        )
    except CgroupError:
        raise WorkerStageFailed("worker_exited") from None

    worker = HostWorkerProcess(None, popen.pid, cgroup, socket, records, sha256, 0, started)
    owner.register("worker_process", _process_release(popen, worker))
    assert popen.stdout is not None
    try:
        line = await asyncio.wait_for(asyncio.to_thread(popen.stdout.readline), READY_DEADLINE_S)
    except TimeoutError:
        line = b""
    if parse_ready_line(line) is None:
        code = popen.poll()
        raise WorkerStageFailed("model_load_failed" if code is not None else "worker_unreachable")
    worker.load_ms = int((time.monotonic() - started) * 1000)
    return worker


def read_requests(path: Path) -> tuple[WorkerRequestRecord, ...]:
    """The host worker's request records; `GuestOutputInvalid` when any line is not a
    strict, closed record (the stage then says `records_invalid`)."""
    if not path.exists():
        return ()
    return read_request_lines(path.read_bytes())


def read_refusals(path: Path) -> ConnectionRefusals:
    """The connections the host worker's server refused, from the same file (read after
    `read_requests` accepted it)."""
    return connection_refusals(path.read_bytes()) if path.exists() else NO_REFUSALS


def worker_category(
    worker: HostWorkerProcess, oom_kills: int | None, records: WorkerCategory = "ok"
) -> WorkerCategory:
    """What the worker's end says about the stage, once its release has run. The
    cgroup's OOM kill count names the cause when it shows one (the kernel killed it
    under its budget); otherwise a worker that was gone before the harness stopped it
    exited on its own (its records may then be cut short: the exit is the cause);
    otherwise what reading its records found (`ok` or `records_invalid`). An unread
    OOM count cannot turn an early exit into `ok`."""
    if oom_kills:
        return "oom_killed"
    if worker.exit_status is not None:
        return "worker_exited"
    return records


def worker_record(
    worker: HostWorkerProcess,
    requests: tuple[WorkerRequestRecord, ...],
    records: WorkerCategory = "ok",
    refusals: ConnectionRefusals = NO_REFUSALS,
) -> WorkerRecord:
    """The worker's summary, after its release (which found whether it had exited)."""
    peak = oom = None
    with contextlib.suppress(CgroupError, OSError):
        readings = worker.cgroup.read_memory()
        peak = readings.peak.value if readings.peak.state == "present" else None
        oom = readings.oom_kills.value if readings.oom_kills.state == "present" else None
    end = WorkerEnd(oom, peak, worker.load_ms, worker.started)
    category = worker_category(worker, oom, records)
    return summary_record("host", category, worker.model_sha256, requests, end, refusals=refusals)


HOST_WORKER_URL = "http://10.0.2.100:8080"
"""The guest's one route to the host worker: QEMU's guestfwd to the worker's socket."""


class HostWorker(Worker):
    """The worker on the host (placement `host`): nothing of its own on the guest's disk;
    the guest reaches its socket in the trial's scratch through the guestfwd channel."""

    placement: WorkerPlacement = "host"
    url = HOST_WORKER_URL
    ready_deadline_s = READY_DEADLINE_S

    def __init__(self) -> None:
        self.process: HostWorkerProcess | None = None
        """Set once it said it is ready."""

    def runtime(self, cache: Path) -> GuestRuntime | None:
        return None

    def disk_files(self, root: Path, gguf: Path | None) -> None:
        return None

    def socket(self, scratch: Path) -> Path | None:
        return scratch / SOCKET_NAME

    async def start(self, launch: WorkerLaunch) -> None:
        self.process = await start_host_worker(
            profile=launch.profile,
            gguf=launch.gguf,
            sha256=launch.sha256,
            scratch=launch.scratch,
            tag=launch.tag,
            owner=launch.owner,
            client_flags=launch.client_flags,
        )

    def started(self) -> bool:
        return self.process is not None

    def ended(self) -> tuple[WorkerRecord, tuple[WorkerRequestRecord, ...]]:
        assert self.process is not None
        category: WorkerCategory = "ok"
        refusals = NO_REFUSALS
        try:
            requests = read_requests(self.process.records)
            refusals = read_refusals(self.process.records)
        except GuestOutputInvalid:
            category, requests = "records_invalid", ()
        return worker_record(self.process, requests, category, refusals), requests

    def memory_pid(self) -> int | None:
        return self.process.popen_pid if self.process is not None else None
