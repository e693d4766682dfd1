"""SlurmExecutor on the real .ci/slurm-up cluster, with plain processes as members.

Each member is a small Python program, so every Slurm end is reached on purpose and
cheaply: exit 0 (with a receipt file), exit 3, an operator's `scancel` answered with
exit 143 (as `harness trial` answers), a one-minute time limit overrun (TIMEOUT), a
request sbatch refuses (64 GiB on a 22 GiB node), a request that can never run (3 CPUs
on a 2-CPU node: pends with reason PartitionConfig), and the suite's own cancel. The
real `harness trial` members are in test_slurm_trials.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from harness.suite.executor import MemberJob
from tests.harness.suite.slurmcluster import Recorder, run_members, slurm_up

pytestmark = pytest.mark.integration

ANSWERS_TERM = """\
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
def stop(*_):
    (out / "answered").write_text("SIGTERM")
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
(out / "started").write_text("x")
time.sleep(600)
"""
WRITES_RECEIPT = """\
import pathlib, sys
(pathlib.Path(sys.argv[1]) / "trial-0123.zip").write_bytes(b"PK")
"""


def job(
    tmp: Path, member: str, code: str, *, memory: int = 64 * 2**20, cpus: int = 1, limit: int = 300
) -> MemberJob:
    receipt_dir = tmp / member
    return MemberJob(
        member_id=member,
        argv=(sys.executable, "-c", code, str(receipt_dir)),
        memory_bytes=memory,
        cpus=cpus,
        time_limit_s=limit,
        receipt_dir=receipt_dir,
    )


async def scancel_when_started(recorder: Recorder, member: str, started: Path) -> float:
    """An operator's `scancel` of one member once its program runs; when it was sent."""
    while member not in recorder.job_ids or not started.exists():
        await asyncio.sleep(0.1)
    proc = await asyncio.create_subprocess_exec("scancel", recorder.job_ids[member])
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    return time.monotonic()


async def test_every_slurm_end_maps_to_its_member_state(tmp_path: Path) -> None:
    slurm_up()
    jobs = [
        job(tmp_path, "ok", WRITES_RECEIPT),
        job(tmp_path, "three", "import sys; sys.exit(3)"),
        job(tmp_path, "scancel", ANSWERS_TERM),
        job(tmp_path, "overrun", "import time; time.sleep(600)", limit=50),
        job(tmp_path, "toobig", "pass", memory=64 * 2**30),
        job(tmp_path, "toomany", "pass", cpus=3),
    ]
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "trial-earlier.zip").write_bytes(b"PK")  # not this job's
    recorder = Recorder()
    started = time.monotonic()
    operator = asyncio.ensure_future(
        scancel_when_started(recorder, "scancel", tmp_path / "scancel" / "started")
    )
    ends = await asyncio.wait_for(run_members(jobs, recorder), 300)
    took = time.monotonic() - started
    await operator
    got = {e.member_id: (e.state, e.exit_code) for e in ends}
    print(f"ends {got} after {took:.0f} s; words {recorder.words}")
    assert [e.member_id for e in ends] == [j.member_id for j in jobs]
    assert got == {
        "ok": ("finished", 0),
        "three": ("finished", 3),
        "scancel": ("cancelled", 143),  # the program answered Slurm's SIGTERM itself
        "overrun": ("cancelled", None),  # TIMEOUT: SIGTERM killed it (ExitCode 0:15)
        "toobig": ("failed_to_start", None),
        "toomany": ("failed_to_start", None),
    }
    by_id = {e.member_id: e for e in ends}
    assert by_id["ok"].receipt_path == tmp_path / "ok" / "trial-0123.zip"
    assert all(e.receipt_path is None for e in ends if e.member_id != "ok")
    assert (tmp_path / "scancel" / "answered").read_text() == "SIGTERM"
    assert recorder.saw("overrun", "TIMEOUT") and recorder.saw("scancel", "CANCELLED")
    assert recorder.saw("toobig", "SBATCH_REFUSED")
    assert recorder.saw("toomany", "NEVER_RUNS PartitionConfig")
    assert "toobig" not in recorder.job_ids  # refused: never had a job
    assert list((tmp_path / "ok").glob("slurm-*.log"))  # the job's output, kept beside


async def test_the_suites_cancel_scancels_every_live_member(tmp_path: Path) -> None:
    """Two members running, a third pending behind them (the node has 2 CPUs): the
    suite's cancel ends all three; the running ones answer SIGTERM themselves."""
    slurm_up()
    jobs = [job(tmp_path, f"m{i}", ANSWERS_TERM) for i in range(3)]
    recorder = Recorder()
    cancel = asyncio.Event()

    async def cancel_when_two_run() -> None:
        while not all((tmp_path / f"m{i}" / "started").exists() for i in range(2)):
            await asyncio.sleep(0.1)
        cancel.set()

    trigger = asyncio.ensure_future(cancel_when_two_run())
    ends = await asyncio.wait_for(run_members(jobs, recorder, cancel), 200)
    await trigger
    got = {e.member_id: (e.state, e.exit_code) for e in ends}
    print(f"ends {got}; words {recorder.words}")
    assert got == {"m0": ("cancelled", 143), "m1": ("cancelled", 143), "m2": ("cancelled", None)}
    assert recorder.saw("m2", "PENDING") and not recorder.saw("m2", "RUNNING")
    for i in range(2):
        assert (tmp_path / f"m{i}" / "answered").read_text() == "SIGTERM"
    assert not (tmp_path / "m2" / "started").exists()


async def test_a_cancel_before_submission_submits_nothing(tmp_path: Path) -> None:
    slurm_up()
    cancel = asyncio.Event()
    cancel.set()
    recorder = Recorder()
    ends = await run_members([job(tmp_path, "m0", "pass")], recorder, cancel)
    assert [(e.state, e.exit_code, e.receipt_path) for e in ends] == [("cancelled", None, None)]
    assert recorder.job_ids == {}
