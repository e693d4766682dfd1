"""SlurmExecutor when things go wrong around it, on the real .ci/slurm-up cluster.

- The suite's own task is cancelled (the runner dies, Ctrl-C past the suite's handler):
  the executor still scancels every job it submitted, so none runs on unowned.
- The controller stops answering: after `controller_gone_s` every live member is `lost`
  instead of a wait without end. The controller is really stopped (by the pid it
  wrote; this test's cluster is the one .ci/slurm-up started) and started again.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from harness.suite.slurm import SlurmExecutor
from tests.harness.suite.slurmcluster import REPO, Recorder, run_members, slurm_up
from tests.harness.suite.test_slurm_states import ANSWERS_TERM, job

pytestmark = pytest.mark.integration


def job_state(job_id: str) -> str:
    done = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.stdout.strip()


async def wait_started(recorder: Recorder, member: str, started: Path) -> str:
    while member not in recorder.job_ids or not started.exists():
        await asyncio.sleep(0.1)
    return recorder.job_ids[member]


async def test_a_cancelled_executor_task_scancels_its_jobs(tmp_path: Path) -> None:
    slurm_up()
    recorder = Recorder()
    task = asyncio.ensure_future(run_members([job(tmp_path, "m0", ANSWERS_TERM)], recorder))
    job_id = await asyncio.wait_for(wait_started(recorder, "m0", tmp_path / "m0" / "started"), 120)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(60):
        if job_state(job_id) == "CANCELLED":
            break
        await asyncio.sleep(0.5)
    assert job_state(job_id) == "CANCELLED"
    assert (tmp_path / "m0" / "answered").read_text() == "SIGTERM"


async def test_an_unanswering_controller_makes_live_members_lost(tmp_path: Path) -> None:
    slurm_up()
    recorder = Recorder()
    executor = SlurmExecutor(poll_s=0.5, workdir=REPO, controller_gone_s=5.0)
    task = asyncio.ensure_future(
        run_members([job(tmp_path, "m0", ANSWERS_TERM)], recorder, executor=executor)
    )
    job_id = await asyncio.wait_for(wait_started(recorder, "m0", tmp_path / "m0" / "started"), 120)
    pid = int(Path("/run/slurmctld.pid").read_text())
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld"
    os.kill(pid, 15)
    try:
        ends = await asyncio.wait_for(task, 120)
    finally:
        slurm_up()  # the controller again, with the job kept in its saved state
        subprocess.run(["scancel", job_id], check=False, timeout=60)
    print(f"ends {ends}; words {recorder.words}")
    assert [(e.state, e.exit_code) for e in ends] == [("lost", None)]
    assert recorder.saw("m0", "CONTROLLER_GONE")
