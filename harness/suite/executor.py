"""The seam between a suite and whatever runs its member trials.

Why: a suite's members run on this host (the local executor, bounded by a host-level
ledger) or on a Slurm cluster (one job per member). Both take the same list of member
jobs and answer with one end per job, so the suite runner, its receipt and its report
do not know which engine ran them. Every member is a whole `harness trial` process
that writes its own receipt; an executor only starts, follows and cancels processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

MemberState = Literal["finished", "cancelled", "lost", "failed_to_start"]
"""How a member's process ended, as far as the executor can tell.

finished: the process exited on its own (any exit status; the receipt says the verdict).
cancelled: the suite or the engine stopped it (SIGTERM/SIGINT, `scancel`, a time limit).
lost: the engine lost track of it (node failure, a job that vanished from the queue).
failed_to_start: the engine refused or could not launch it (sbatch error, exec error).
"""


@dataclass(frozen=True)
class MemberJob:
    """One trial to run: the full command line and what it may use."""

    member_id: str
    """Stable within the suite, e.g. `0003`; also names the member's receipt directory."""
    argv: tuple[str, ...]
    """The whole `harness trial ...` command, including `--out receipt_dir`."""
    memory_bytes: int
    """The profile's host memory floor: what the member reserves while it runs."""
    cpus: int
    """The profile's vCPUs."""
    time_limit_s: int
    """A wall-time bound from the profile's deadlines; engines enforce it with SIGTERM."""
    receipt_dir: Path
    """Where the member's `harness trial` writes its receipt ZIP."""


@dataclass(frozen=True)
class MemberEnd:
    """How one member ended; the receipt in `receipt_dir`, if any, says the rest."""

    member_id: str
    state: MemberState
    exit_code: int | None
    """The trial process's exit status when the engine reports one."""
    receipt_path: Path | None
    """The member's receipt ZIP when one was written."""
    started: bool | None = None
    """Whether the member's process ever ran; None when the engine cannot tell. A signal
    can kill a started trial before it answers (no exit status), so a missing exit code
    alone does not mean the member never started."""


ProgressCallback = Callable[[str, str], None]
"""Called with (member_id, engine-specific state word) whenever a member's state changes."""


class Executor(Protocol):
    """Runs member jobs to their ends; cancel stops every member that still runs."""

    max_running: int
    """The most members that ran at once, as far as the executor saw (the suite
    receipt's concurrency reached)."""

    async def run(
        self,
        jobs: Sequence[MemberJob],
        cancel: asyncio.Event,
        on_progress: ProgressCallback,
    ) -> list[MemberEnd]:
        """Return one end per job, in the jobs' order, after every member has ended."""
        ...
