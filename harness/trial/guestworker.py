"""The worker inside the guest (placement `guest`; what `auto` picks under KVM).

Why in the guest: with hardware acceleration the model runs there near native speed,
and then the host serves nothing the guest can talk to — no channel exists at all.
The worker runs from the gate-verified runtime (its llama.cpp is the guest build,
SSE4.2 only, host/wheels.py), hashes the GGUF on the read-only disk against the
pinned digest before loading it, and listens on the guest's loopback only. It runs in
its own cgroup v2 inside the guest under the profile's worker limit, so the guest
kernel enforces the budget and the worker's admission reads it as its `self` scope.
Its request records are written to a root-only directory the agent cannot reach.

The SSH channel that started it stays open while it runs; it is stopped by a signal
sent over a second command, and its cleanup proof is that its PID is gone from the
guest's /proc after the channel reported its end.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from harness.profiles import Profile
from harness.trial.diskfiles import REPO, link_or_copy
from harness.trial.guestcmd import (
    GATE_SOURCE,
    READ_ONLY,
    WORKER_PINS,
    WORKER_RUNTIME,
    gated_command,
    parse_gate_line,
)
from harness.trial.guestrecords import (
    NO_REFUSALS,
    GuestOutputInvalid,
    connection_refusals,
    read_request_lines,
)
from harness.trial.owned import Owner
from harness.trial.worker import (
    ReadyLine,
    Worker,
    WorkerEnd,
    WorkerLaunch,
    WorkerStageFailed,
    parse_ready_line,
    serve_args,
    summary_record,
)
from host.release import CleanupResult
from host.runtime import (
    WORKER_DISTRIBUTIONS,
    GuestRuntime,
    RuntimeBuildError,
    RuntimeFailure,
    build_runtime,
)
from host.ssh import RemoteProcess, SshSession
from host.ssh.errors import SshError
from host.wheels import WheelBuildError, build_llama
from receipts.records import WorkerRecord, WorkerRequestRecord
from receipts.records.worker import WorkerCategory
from receipts.vocabulary import WorkerPlacement

GUEST_PORT = 8080
WORKER_URL = f"http://127.0.0.1:{GUEST_PORT}"
MODEL_FILE = "model.gguf"
"""The GGUF's name on the read-only disk."""
CGROUP = "/sys/fs/cgroup/harness-worker"
STATE_DIR = "/run/harness-worker"
RECORDS = f"{STATE_DIR}/records.jsonl"
PID_PREFIX = b"HARNESS-WORKER-PID "
READY_DEADLINE_S = 300.0
"""Gate over the runtime, GGUF hash and model load, all under TCG in the worst case."""
STOP_DEADLINE_S = 10.0
COMMAND_DEADLINE_S = 30.0


@dataclass
class GuestWorkerProcess:
    """The launched worker; filled in as its startup lines arrive, so that a startup
    that fails half way is still stopped by PID and accounted for."""

    process: RemoteProcess
    model_sha256: str
    started: float
    pid: int | None = None
    load_ms: int = 0
    records_raw: bytes | None = None
    exited_early: bool = False
    records_unread: bool = False
    records_invalid: bool = False
    """The records came back but were not strict, closed records (`records_invalid`)."""
    peak_bytes: int | None = None
    oom_kills: int | None = None
    requests: tuple[WorkerRequestRecord, ...] = ()


def launch_script(
    profile: Profile, sha256: str, pins_sha256: str, *, client_flags: tuple[str, ...] = ()
) -> str:
    """The guest command: own cgroup (memory limit, no swap), then exec the gated worker."""
    limit = profile.memory.worker_cgroup_limit
    worker = gated_command(
        pins_sha256,
        "guest.worker",
        *serve_args(
            profile, f"{READ_ONLY}/{MODEL_FILE}", sha256, RECORDS, client_flags=client_flags
        ),
        "--port",
        str(GUEST_PORT),
        runtime=WORKER_RUNTIME,
        pins=WORKER_PINS,
    )
    lines = [
        "set -eu",
        f"mkdir -m 0700 -p {STATE_DIR}",
        f": > {RECORDS}",
        "grep -q '^[^ ]* /sys/fs/cgroup cgroup2 ' /proc/mounts"
        " || mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup",
        "echo +memory > /sys/fs/cgroup/cgroup.subtree_control",
        f"mkdir {CGROUP}",
        f"echo {limit} > {CGROUP}/memory.max",
        f'test "$(cat {CGROUP}/memory.max)" = {limit}',
        f"if [ -e {CGROUP}/memory.swap.max ]; then echo 0 > {CGROUP}/memory.swap.max; fi",
        f"echo $$ > {CGROUP}/cgroup.procs",
        'echo "HARNESS-WORKER-PID $$"',
        f"exec {worker}",
    ]
    return "sh -c " + shlex.quote("\n".join(lines))


async def _read_startup(
    process: RemoteProcess, worker: GuestWorkerProcess, deadline: float
) -> ReadyLine | None:
    """The PID line, the gate's line, then the worker's ready line, within one deadline."""
    pid_line = await process.readline(deadline_s=max(deadline - time.monotonic(), 0.1))
    if not pid_line.startswith(PID_PREFIX):
        raise WorkerStageFailed("worker_exited")
    worker.pid = int(pid_line[len(PID_PREFIX) :])
    gate = parse_gate_line(await process.readline(deadline_s=max(deadline - time.monotonic(), 0.1)))
    if gate is None or gate.category != "ok":
        raise WorkerStageFailed("worker_exited")
    ready_line = await process.readline(deadline_s=max(deadline - time.monotonic(), 0.1))
    return parse_ready_line(ready_line)


async def start_guest_worker(
    *,
    session: SshSession,
    profile: Profile,
    sha256: str,
    pins_sha256: str,
    owner: Owner,
    guest_gone: Callable[[], Awaitable[bool]],
    client_flags: tuple[str, ...] = (),
) -> GuestWorkerProcess:
    """Start the worker in the guest and wait for its ready line; register its release.

    A lost SSH connection is not the worker's failure: it propagates as SshError, so
    the trial names what happened to the VM. `guest_gone` tells the release whether
    QEMU has exited, which ends every guest process (the worker's cleanup proof when
    the guest can no longer be asked)."""
    started = time.monotonic()
    process = await session.start(
        launch_script(profile, sha256, pins_sha256, client_flags=client_flags),
        deadline_s=COMMAND_DEADLINE_S,
        stdin=GATE_SOURCE,
    )
    worker = GuestWorkerProcess(process, sha256, started)
    owner.register("worker_process", _release(session, worker, guest_gone))
    try:
        ready = await _read_startup(process, worker, started + READY_DEADLINE_S)
    except SshError as exc:
        if exc.category != "command_timeout":
            raise
        raise WorkerStageFailed("worker_unreachable") from None
    except ValueError:
        raise WorkerStageFailed("worker_exited") from None
    if ready is None or ready.port != GUEST_PORT:
        raise WorkerStageFailed("model_load_failed" if process.running() else "worker_exited")
    worker.load_ms = int((time.monotonic() - started) * 1000)
    return worker


def _int_or_none(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


async def _read_cgroup(session: SshSession, worker: GuestWorkerProcess) -> None:
    """Peak memory and OOM kills of the guest worker cgroup, then remove it."""
    read = await session.run(
        f"cat {CGROUP}/memory.peak 2>/dev/null || echo -; "
        f"sed -n 's/^oom_kill //p' {CGROUP}/memory.events; rmdir {CGROUP}",
        deadline_s=COMMAND_DEADLINE_S,
    )
    lines = [*read.stdout.decode(errors="replace").splitlines(), "", ""]
    worker.peak_bytes = _int_or_none(lines[0])
    worker.oom_kills = _int_or_none(lines[1])


async def _collect_evidence(session: SshSession, worker: GuestWorkerProcess) -> None:
    """The cgroup's readings and the request records, once the worker has exited.
    Records that cannot be fetched leave the worker's category `worker_unreachable`:
    its totals would otherwise claim zero requests that nobody counted."""
    try:
        await _read_cgroup(session, worker)
        with tempfile.TemporaryDirectory(prefix="harness-guest-worker-") as tmp:
            local = Path(tmp) / "records.jsonl"
            await session.get(RECORDS, local, deadline_s=60.0)
            worker.records_raw = local.read_bytes()  # nothing of the trial stays on disk
    except SshError:
        worker.records_unread = True


def _release(
    session: SshSession, worker: GuestWorkerProcess, guest_gone: Callable[[], Awaitable[bool]]
) -> Callable[[], Awaitable[tuple[CleanupResult, ...]]]:
    async def release() -> tuple[CleanupResult, ...]:
        began = time.monotonic()
        process = worker.process
        worker.exited_early = not process.running()
        gone = False
        try:
            if worker.pid is not None and process.running():
                await session.run(f"kill -TERM {worker.pid}", deadline_s=COMMAND_DEADLINE_S)
            try:
                await process.wait(deadline_s=STOP_DEADLINE_S)
            except SshError:
                if worker.pid is not None:
                    await session.run(f"kill -KILL {worker.pid}", deadline_s=COMMAND_DEADLINE_S)
                await process.wait(deadline_s=STOP_DEADLINE_S)
            gone = True  # the channel reported the command's end
            if worker.pid is not None:
                probe = await session.run(
                    f"test ! -e /proc/{worker.pid}", deadline_s=COMMAND_DEADLINE_S
                )
                gone = probe.exit_status == 0
        except SshError:
            gone = False
        finally:
            process.close()
        if gone and worker.pid is not None:
            await _collect_evidence(session, worker)
        else:
            worker.records_unread = True  # not stopped, or never started: nothing final
        elapsed = int((time.monotonic() - began) * 1000)
        if gone:
            return (CleanupResult("worker_process", "confirmed", "process_reaped", elapsed),)
        if await guest_gone():
            return (CleanupResult("worker_process", "confirmed", "process_gone", elapsed),)
        return (CleanupResult("worker_process", "failed", "unread", elapsed),)

    return release


def collect(worker: GuestWorkerProcess) -> tuple[WorkerRequestRecord, ...]:
    """The request records fetched at release: none if the file never came back, and none
    (with `records_invalid` set) if any line of it is not a strict, closed record."""
    if worker.records_raw is None:
        return ()
    try:
        worker.requests = read_request_lines(worker.records_raw)
    except GuestOutputInvalid:
        worker.records_invalid, worker.requests = True, ()
    return worker.requests


def guest_worker_record(
    worker: GuestWorkerProcess, requests: tuple[WorkerRequestRecord, ...]
) -> WorkerRecord:
    category: WorkerCategory = "ok"
    if worker.oom_kills:
        category = "oom_killed"
    elif worker.records_unread:
        category = "worker_unreachable"
    elif worker.records_invalid:  # before worker_exited: its counts of 0 were never read
        category = "records_invalid"
    elif worker.exited_early:
        category = "worker_exited"
    end = WorkerEnd(worker.oom_kills, worker.peak_bytes, worker.load_ms, worker.started)
    refusals = NO_REFUSALS
    if worker.records_raw is not None and not worker.records_invalid:
        refusals = connection_refusals(worker.records_raw)
    return summary_record("guest", category, worker.model_sha256, requests, end, refusals=refusals)


class GuestWorker(Worker):
    """The worker in the guest (placement `guest`): its own gated runtime (with the guest
    build of llama.cpp) and the GGUF on the read-only disk; no channel to the host."""

    placement: WorkerPlacement = "guest"
    url = WORKER_URL
    ready_deadline_s = READY_DEADLINE_S

    def __init__(self) -> None:
        self.built: GuestRuntime | None = None
        self.process: GuestWorkerProcess | None = None
        """Set once it said it is ready."""

    def runtime(self, cache: Path) -> GuestRuntime | None:
        self.built = worker_runtime(cache)
        return self.built

    def disk_files(self, root: Path, gguf: Path | None) -> None:
        assert self.built is not None and gguf is not None
        link_or_copy(gguf, root / MODEL_FILE)
        shutil.copytree(self.built.root, root / "worker-runtime", copy_function=link_or_copy)
        shutil.copy(self.built.pins, root / "worker-pins.json")

    def socket(self, scratch: Path) -> Path | None:
        return None

    async def start(self, launch: WorkerLaunch) -> None:
        assert self.built is not None
        self.process = await start_guest_worker(
            session=launch.session(),
            profile=launch.profile,
            sha256=launch.sha256,
            pins_sha256=self.built.pins_sha256,
            owner=launch.owner,
            guest_gone=launch.guest_gone,
            client_flags=launch.client_flags,
        )

    def started(self) -> bool:
        return self.process is not None

    def ended(self) -> tuple[WorkerRecord, tuple[WorkerRequestRecord, ...]]:
        assert self.process is not None
        requests = collect(self.process)
        return guest_worker_record(self.process, requests), requests

    def memory_pid(self) -> int | None:
        return None


def worker_runtime(cache: Path) -> GuestRuntime:
    """The guest worker's runtime: its wheels and the guest build of llama.cpp (SSE4.2
    only); raises RuntimeBuildError (a llama build that could not download says so)."""
    try:
        llama = build_llama("guest", cache / "wheels")
    except WheelBuildError as exc:
        failure: RuntimeFailure = (
            "fetch_failed" if exc.category == "download_failed" else "build_failed"
        )
        raise RuntimeBuildError(failure) from None
    return build_runtime(
        REPO,
        distributions=WORKER_DISTRIBUTIONS,
        extra_wheels=(llama.wheel,),
        cache=cache / "runtimes",
        wheelsets=cache / "wheelsets",
    )
