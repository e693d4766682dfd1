"""Real `harness trial` processes as Slurm jobs on the .ci/slurm-up cluster.

Two members, tiny profile, scripted agent (the task's solution), real TCG guests, so
run under the machine's VM lock. Each asks for its profile's host memory floor (3 GiB)
and vCPUs (2: the whole node, so they run one after the other). The first runs to its
end: `finished`, exit 0, an `accepted` receipt that audits valid. The second is
`scancel`ed by the test, as an operator would, once its own log says the agent stage
began (the guest is up): Slurm sends SIGTERM to the job's processes (proctrack/
linuxproc: the trial and its children), the trial answers with a valid `cancelled`
receipt naming the agent stage and SIGTERM, exits 143 within KillWait, and leaves no
process, cgroup or directory behind.

The batch script's `exec` is what makes the job's exit code the trial's own 143: its
mutation control runs on the cheaper plain-process member in test_slurm_states.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.suite.executor import MemberJob
from host.cgroups import detect
from host.vm.leftovers import find_processes, find_trial_dirs
from receipts.audit import audit_and_read
from tests.harness.suite.slurmcluster import REPO, Recorder, run_members, slurm_up

pytestmark = pytest.mark.integration
SOLUTION = "profiles/tasks/py-one-line-fix/scripts/solution.json"
TRIALS = Path.home() / ".cache" / "harness" / "trials"
GRACE_S = 30.0
"""Slurm's KillWait: the trial's receipt must be written before SIGKILL would come."""


def trial_job(tmp: Path, member: str) -> MemberJob:
    profile = load_profile("tiny")
    receipt_dir = tmp / member
    argv = (
        *(sys.executable, "-m", "harness.cli", "--log-format", "json", "--log-level", "info"),
        *("trial", "--profile", "tiny", "--agent", f"scripted:{SOLUTION}", "--accel", "tcg"),
        *("--out", str(receipt_dir), "--json"),
    )
    return MemberJob(
        member_id=member,
        argv=argv,
        memory_bytes=profile.memory.host_admission_floor,
        cpus=profile.vm.vcpus,
        time_limit_s=profile.vm.deadline_s,
        receipt_dir=receipt_dir,
    )


def stage_began(receipt_dir: Path, stage: str) -> bool:
    for log in receipt_dir.glob("slurm-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "stage_begin" and event.get("stage") == stage:
                return True
    return False


async def scancel_in_stage(recorder: Recorder, job: MemberJob, stage: str) -> float:
    deadline = time.monotonic() + 1500
    while not (job.member_id in recorder.job_ids and stage_began(job.receipt_dir, stage)):
        assert time.monotonic() < deadline, f"{job.member_id} never reached {stage}"
        await asyncio.sleep(0.2)
    proc = await asyncio.create_subprocess_exec("scancel", recorder.job_ids[job.member_id])
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    return time.monotonic()


def audited(receipt: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "audit", "--json", str(receipt)],
        cwd=REPO,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout
    result: dict[str, object] = json.loads(done.stdout)
    return result


async def test_real_trials_finish_and_answer_scancel_with_a_cancelled_receipt(
    tmp_path: Path,
) -> None:
    slurm_up()
    jobs = [trial_job(tmp_path, "0001"), trial_job(tmp_path, "0002")]
    recorder = Recorder()
    started = time.monotonic()
    operator = asyncio.ensure_future(scancel_in_stage(recorder, jobs[1], "agent"))
    ends = await asyncio.wait_for(run_members(jobs, recorder), 1800)
    ended = time.monotonic()
    scancelled = await operator
    print(f"ends {ends}; words {recorder.words}; took {ended - started:.0f} s")

    first, second = ends
    assert (first.state, first.exit_code) == ("finished", 0)
    assert first.receipt_path is not None and first.receipt_path.parent == jobs[0].receipt_dir
    assert audited(first.receipt_path)["derived_verdict"] == "accepted"

    assert (second.state, second.exit_code) == ("cancelled", 143)
    assert recorder.saw("0002", "CANCELLED")
    assert second.receipt_path is not None and second.receipt_path.parent == jobs[1].receipt_dir
    assert audited(second.receipt_path)["derived_verdict"] == "cancelled"
    result, records = audit_and_read(second.receipt_path.read_bytes())
    assert result.valid and records is not None and records.trial is not None
    trial = records.trial
    assert (trial.cancelled_stage, trial.cancel_signal) == ("agent", "SIGTERM")  # type: ignore[union-attr]
    assert records.cleanup and {c.status for c in records.cleanup} == {"confirmed"}
    # The receipt was complete before KillWait ran out (the file's time, not the poll's).
    written = second.receipt_path.stat().st_mtime - (time.time() - time.monotonic())
    print(f"receipt written {written - scancelled:.1f} s after scancel")
    assert written - scancelled < GRACE_S

    tag = trial.trial_id[:16]
    assert [p for p in find_processes() if p.tag == tag] == []
    listing = detect().list_names(prefix=f"trial-{tag}")
    assert not any(item.names for item in listing.values())
    assert [p for p in find_trial_dirs(TRIALS) if tag in p.name] == []
