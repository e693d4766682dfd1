"""State parsing and mapping against output captured from the .ci/slurm-up cluster
(Slurm 22.05.8, Debian 12): `scontrol -o show job ID` lines and `squeue -h -t all -o
'%i|%T|%r'` for jobs that exited 0, exited 3, were scancel'd (before and after their
SIGTERM handler answered with 143), ran over a one-minute limit, were refused at
submission, asked for more CPUs than the node has, and one being killed (COMPLETING)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.suite.executor import MemberJob, MemberState
from harness.suite.slurm import batch_script, sbatch_argv
from harness.suite.slurmstate import (
    INVALID_JOB_ID,
    NEVER_RUNS_REASONS,
    exit_code,
    member_state,
    parse_scontrol_job,
    parse_squeue,
)

CAPTURED = Path(__file__).parent / "captured"


def captured(name: str) -> str:
    return (CAPTURED / name).read_text()


@pytest.mark.parametrize(
    ("name", "job_id", "word", "state", "code"),
    [
        ("completed-exit0.txt", "1", "COMPLETED", "finished", 0),
        ("failed-exit3.txt", "2", "FAILED", "finished", 3),
        ("cancelled-signal15.txt", "3", "CANCELLED", "cancelled", None),
        ("timeout.txt", "4", "TIMEOUT", "cancelled", None),
        ("cancelled-exit143.txt", "6", "CANCELLED", "cancelled", 143),
        ("failed-badconstraints.txt", "7", "FAILED", "finished", None),
        ("cancelled-pending.txt", "8", "CANCELLED", "cancelled", None),
    ],
)
def test_ended_jobs(
    name: str, job_id: str, word: str, state: MemberState, code: int | None
) -> None:
    end = parse_scontrol_job(captured(name))
    assert end is not None
    assert (end.job_id, end.state) == (job_id, word)
    assert member_state(end.state) == state
    assert exit_code(end) == code


@pytest.mark.parametrize("name", ["running.txt", "completing.txt", "pending.txt"])
def test_live_jobs_have_not_ended(name: str) -> None:
    """COMPLETING is a scancel'd job whose trial is still writing its receipt: not ended."""
    end = parse_scontrol_job(captured(name))
    assert end is not None
    assert member_state(end.state) is None


def test_squeue_rows() -> None:
    rows = parse_squeue(captured("squeue.txt"))
    assert {k: v.state for k, v in rows.items()} == {
        "1": "COMPLETED",
        "2": "FAILED",
        "3": "CANCELLED",
        "4": "TIMEOUT",
        "5": "CANCELLED",
        "6": "CANCELLED",
        "7": "FAILED",
        "8": "CANCELLED",
    }
    assert rows["4"].reason == "TimeLimit"
    live = parse_squeue(captured("squeue-live.txt"))
    assert (live["9"].state, live["9"].reason) == ("PENDING", "PartitionConfig")
    assert live["9"].reason in NEVER_RUNS_REASONS
    assert live["10"].state == "COMPLETING"
    assert member_state(live["10"].state) is None


def test_unknown_words_are_lost_never_finished() -> None:
    for word in ("NODE_FAIL", "BOOT_FAIL", "REVOKED", "SOMETHING_NEW"):
        assert member_state(word) == "lost"
    for word in ("PREEMPTED", "DEADLINE", "OUT_OF_MEMORY"):
        assert member_state(word) == "cancelled"


def test_not_a_job_line() -> None:
    assert parse_scontrol_job(captured("invalid-stderr.txt")) is None
    assert INVALID_JOB_ID in captured("invalid-stderr.txt")
    assert parse_scontrol_job("") is None


def test_job_state_in_the_job_name_does_not_fool_the_parser() -> None:
    """A job name is the first free-text field; a name that spells a state is not one."""
    line = captured("running.txt").replace("JobName=sbatch", "JobName=JobState=COMPLETED")
    end = parse_scontrol_job(line)
    assert end is not None and end.state == "RUNNING"


def test_batch_script_execs_the_quoted_argv() -> None:
    script = batch_script(("harness", "trial", "--out", "/tmp/a b", "--agent", "scripted:x;y"))
    assert script == "#!/bin/sh\nexec harness trial --out '/tmp/a b' --agent 'scripted:x;y'\n"


def test_sbatch_requests_round_up() -> None:
    job = MemberJob(
        member_id="0003",
        argv=("true",),
        memory_bytes=3 * 2**30 + 1,
        cpus=2,
        time_limit_s=61,
        receipt_dir=Path("/tmp/r"),
    )
    argv = sbatch_argv(job, ("--partition=p",), Path("/w"), Path("/tmp/r/slurm-%j.log"))
    assert "--mem=3073M" in argv
    assert "--time=2" in argv
    assert "--cpus-per-task=2" in argv
    assert "--no-requeue" in argv
    assert argv[-1] == "--partition=p"
