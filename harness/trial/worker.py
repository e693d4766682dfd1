"""The worker stage's seam: where the worker runs is one strategy object.

Why a strategy: the worker runs on the host beside the VM (hostworker.py) or inside the
guest (guestworker.py), and the two differ in everything the trial touches: what goes on
the read-only disk, the URL the agent is given, how long it may take to be ready, how it
is started, stopped and proven gone. The trial holds a `Worker` and asks it at each of
those points, rather than asking "which placement?" there, and the channel each
placement has is stated once (receipts/vocabulary.py `channel_for`), the
same mapping the audit requires.

Also here: what both placements share (the `serve` arguments, the ready line, the
failure type and the summary record built from the request records).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.profiles import Profile
from harness.trial.guestrecords import NO_REFUSALS, GuestOutputInvalid, strict_object
from harness.trial.owned import OwnedResources, Owner
from host.runtime import GuestRuntime
from host.ssh import SshSession
from receipts.ownership import WORKER_OWNS
from receipts.records import WorkerRecord, WorkerRequestRecord
from receipts.records.cleanup import Resource
from receipts.records.worker import ConnectionRefusals, WorkerCategory
from receipts.totals import worker_totals
from receipts.vocabulary import Channel, WorkerPlacement, channel_for

CONSTRAINT = "llguidance"
"""The constraint backend the worker is started with (its default, stated here)."""


class WorkerStageFailed(Exception):
    def __init__(self, category: WorkerCategory) -> None:
        super().__init__(category)
        self.category: WorkerCategory = category


@dataclass(frozen=True)
class ReadyLine:
    """The worker's one startup line (guest/worker/__main__.py): it listens, and where."""

    port: int | None


def parse_ready_line(line: bytes) -> ReadyLine | None:
    """The worker's ready line, `{"ready": true, "port": N or null, ...}` as strict JSON,
    or None for anything else (nothing, a partial line, a duplicate `ready`, `"ready": 1`):
    a worker that did not say it is ready in exactly these words is not ready. The caller
    names the failure by whether the process still runs."""
    try:
        value = strict_object(line)
    except GuestOutputInvalid:
        return None
    port = value.get("port")
    port_ok = port is None or (isinstance(port, int) and not isinstance(port, bool))
    if value.get("ready") is not True or not port_ok:
        return None
    return ReadyLine(port if isinstance(port, int) else None)


def serve_args(
    profile: Profile, model: str, sha256: str, records: str, *, client_flags: tuple[str, ...] = ()
) -> list[str]:
    """`guest.worker serve` arguments from the profile, the same wherever it runs (the
    caller adds where it listens: a Unix socket on the host, a loopback port in the guest).
    `client_flags`: what the agent's client needs of the worker (client_flags())."""
    inference = profile.inference
    return [
        "serve",
        "--model",
        model,
        "--sha256",
        sha256,
        "--threads",
        str(inference.threads),
        "--context",
        str(inference.context_tokens),
        "--request-floor",
        str(profile.memory.request_admission_floor),
        "--runtime-guard",
        str(profile.memory.runtime_guard),
        "--deadline-s",
        str(inference.request_deadline_s),
        "--max-tokens",
        str(inference.max_tokens),
        "--records",
        records,
        *client_flags,
    ]


def client_flags(*, agent_cli: bool, tools_required: bool) -> tuple[str, ...]:
    """The worker's options for the agent's client. The harness loop asks for what it
    needs itself; an agent CLI cannot: it asks `auto` (so the worker applies the
    profile's `model_tool_required`) and reuses pooled connections the worker may have
    closed while it ran a tool (so every response closes its connection)."""
    if not agent_cli:
        return ()
    return ("--close-connections", *(("--tools-required",) if tools_required else ()))


@dataclass(frozen=True)
class WorkerEnd:
    """What is measured of a worker once it ended (its cgroup's readings, its timing)."""

    oom_kills: int | None
    peak_rss_bytes: int | None
    load_ms: int
    started: float
    """time.monotonic() when it was launched."""


def summary_record(
    placement: WorkerPlacement,
    category: WorkerCategory,
    model_sha256: str,
    requests: tuple[WorkerRequestRecord, ...],
    end: WorkerEnd | None,
    *,
    refusals: ConnectionRefusals = NO_REFUSALS,
) -> WorkerRecord:
    """The worker's record: its totals are counts of its request records (the function
    the audit recounts with), its channel the placement's one channel; `end` None for a
    worker that never started (nothing was measured)."""
    return WorkerRecord(
        category=category,
        placement=placement,
        channel=channel_for(placement),
        model_sha256=model_sha256,
        constraint_backend=CONSTRAINT if end is not None else "none",
        **worker_totals(requests),
        oom_kills=end.oom_kills if end is not None else None,
        peak_rss_bytes=end.peak_rss_bytes if end is not None else None,
        load_ms=end.load_ms if end is not None else 0,
        duration_ms=int((time.monotonic() - end.started) * 1000) if end is not None else 0,
        connections_refused=refusals,
    )


@dataclass(frozen=True)
class WorkerLaunch:
    """What starting a worker may use; each placement takes what it needs."""

    profile: Profile
    gguf: Path
    sha256: str
    scratch: Path
    tag: str
    owner: Owner
    """Where it registers what it owns (its placement's declaration)."""
    session: Callable[[], SshSession]
    """The agent guest's SSH session (raises when that guest is gone)."""
    guest_gone: Callable[[], Awaitable[bool]]
    """Whether the agent guest's QEMU has exited."""
    client_flags: tuple[str, ...] = ()
    """What the agent's client needs of the worker (client_flags())."""


class Worker(Protocol):
    """One placement of the worker. The pipeline calls these in order: `runtime` and
    `disk_files` while building the read-only disk, `socket` for the VM's channel,
    `start` in the worker stage, `stop` after the agent (its record and requests)."""

    placement: WorkerPlacement
    url: str
    """The API base URL the agent is given, as the guest reaches it."""
    ready_deadline_s: float

    @property
    def channel(self) -> Channel:
        return channel_for(self.placement)

    @property
    def owns(self) -> tuple[Resource, ...]:
        """What it owns where it runs (receipts/ownership.py)."""
        return WORKER_OWNS[self.placement]

    def runtime(self, cache: Path) -> GuestRuntime | None:
        """A runtime of its own on the read-only disk; raises RuntimeBuildError."""
        ...

    def disk_files(self, root: Path, gguf: Path | None) -> None:
        """Put what it needs on the read-only disk's tree `root`."""
        ...

    def socket(self, scratch: Path) -> Path | None:
        """The host end of the guest's channel to it, or None when there is none."""
        ...

    async def start(self, launch: WorkerLaunch) -> None:
        """Start it and wait for its ready line; raises WorkerStageFailed."""
        ...

    def started(self) -> bool:
        """Whether it said it is ready (then `stop` has a record to give)."""
        ...

    def ended(self) -> tuple[WorkerRecord, tuple[WorkerRequestRecord, ...]]:
        """Its record and request records, once its release has run."""
        ...

    async def stop(
        self, owned: OwnedResources
    ) -> tuple[WorkerRecord, tuple[WorkerRequestRecord, ...]] | None:
        """Stop a started worker (its release, early) and read its record and requests;
        None when it never started (its release, if registered, runs at teardown)."""
        if not self.started():
            return None
        await owned.release_early("worker_process")
        return self.ended()

    def memory_pid(self) -> int | None:
        """A host process whose memory cgroup the trial samples; None for none."""
        ...

    def failed_record(self, category: WorkerCategory, model_sha256: str) -> WorkerRecord:
        """The record of a start that failed with `category`."""
        return summary_record(self.placement, category, model_sha256, (), None)
