"""Reading Slurm's job states, without accounting, and mapping them to MemberState.

Why a module of its own: the executor follows jobs through `squeue` (cheap, many jobs
per call) and reads an ended job's exit status from `scontrol -o show job` (kept for
MinJobAge after the end; `sacct` needs slurmdbd, which a test cluster has not). Both
outputs are text; their parsing and the state table are pure functions that the unit
tests check against output captured from the .ci/slurm-up cluster.

Slurm's exit code is `status:signal`. A job that `scancel` or a time limit stopped
shows JobState COMPLETING while its processes still run (KillWait), and its final word
(CANCELLED, TIMEOUT) only once they are gone; so a job is ended, and its receipt can be
looked for, only when the word is a terminal one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.suite.executor import MemberState

LIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "STOPPED",
        "SIGNALING",
        "STAGE_OUT",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESV_DEL_HOLD",
    }
)
"""Words of a job that has not ended yet (its processes may still run)."""

TERMINAL_STATES: dict[str, MemberState] = {
    "COMPLETED": "finished",
    "FAILED": "finished",
    "CANCELLED": "cancelled",
    "TIMEOUT": "cancelled",
    "PREEMPTED": "cancelled",
    "DEADLINE": "cancelled",
    "OUT_OF_MEMORY": "cancelled",
    "NODE_FAIL": "lost",
    "BOOT_FAIL": "lost",
    "REVOKED": "lost",
    "SPECIAL_EXIT": "lost",
}
"""Slurm's end words. COMPLETED/FAILED: the process exited on its own (any status).
CANCELLED (scancel), TIMEOUT, PREEMPTED, DEADLINE, OUT_OF_MEMORY: the engine stopped it.
NODE_FAIL, BOOT_FAIL, REVOKED (moved to another cluster), SPECIAL_EXIT: the engine lost
it. A word in neither table is read as lost, never as finished."""

NEVER_RUNS_REASONS = frozenset(
    {
        "BadConstraints",
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "InvalidAccount",
        "InvalidQOS",
    }
)
"""Pending reasons that say the request can never be met on this cluster (e.g. more
CPUs than any node has: `PartitionConfig`, measured). sbatch accepts such a job and it
would pend forever, so the executor cancels it and reports failed_to_start."""


@dataclass(frozen=True)
class QueueRow:
    """One job as `squeue -o '%i|%T|%r'` shows it."""

    job_id: str
    state: str
    reason: str


@dataclass(frozen=True)
class JobEnd:
    """An ended job's end word and exit code, from `scontrol -o show job`."""

    job_id: str
    state: str
    exit_status: int
    signal: int
    started: bool
    """Whether a batch process ran: `BatchHost=` is shown only for a job placed on a
    node (a job cancelled while pending shows ExitCode 0:0 and no BatchHost)."""


SQUEUE_FORMAT = "%i|%T|%r"
_ROW = re.compile(r"^(\d+)\|([A-Z_]+)\|(.*)$")


def parse_squeue(text: str) -> dict[str, QueueRow]:
    """Rows of `squeue -h -t all -o '%i|%T|%r'`, by job id; other lines are ignored."""
    rows: dict[str, QueueRow] = {}
    for line in text.splitlines():
        match = _ROW.match(line.strip())
        if match is not None:
            rows[match[1]] = QueueRow(match[1], match[2], match[3])
    return rows


_JOB_ID = re.compile(r"(?:^|\s)JobId=(\d+)\s")
_JOB_STATE = re.compile(r"\sJobState=([A-Z_]+)\s")
_EXIT_CODE = re.compile(r"\sExitCode=(\d+):(\d+)\s")
_BATCH_HOST = re.compile(r"\sBatchHost=\S+\s")


def parse_scontrol_job(line: str) -> JobEnd | None:
    """The job id, state word and ExitCode of one `scontrol -o show job ID` line; None
    when the line is not one (the first occurrence of each key counts: they come before
    any field a job's submitter controls except JobName, which the executor sets)."""
    text = f" {line.strip()} "
    job_id, state, code = _JOB_ID.search(text), _JOB_STATE.search(text), _EXIT_CODE.search(text)
    if job_id is None or state is None or code is None:
        return None
    started = _BATCH_HOST.search(text) is not None
    return JobEnd(job_id[1], state[1], int(code[1]), int(code[2]), started)


def member_state(word: str) -> MemberState | None:
    """The member's end for a state word; None while the job has not ended."""
    if word in LIVE_STATES:
        return None
    return TERMINAL_STATES.get(word, "lost")


def exit_code(end: JobEnd) -> int | None:
    """The process's own exit status; None when a signal ended it (Slurm reports the
    signal, e.g. `0:15` for a process SIGTERM killed before it could answer) or when no
    process ever ran (cancelled while pending, refused at placement)."""
    return end.exit_status if end.signal == 0 and end.started else None


INVALID_JOB_ID = "Invalid job id specified"
"""What squeue and scontrol print when no asked-for job is known (any more)."""
