"""`harness suite run --executor slurm --dispatch` end to end on the .ci/slurm-up cluster.

A CI owner's whole path, as processes from a clean clone (the dispatched members check
that their tree is clean): issue a suite ticket, run a two-member suite (one exercise's
oracle and null, tiny profile, real TCG guests) through Slurm, and `scancel` the first
member as an operator would once its job runs. That member answers Slurm's SIGTERM with
its own `cancelled` receipt (exit 143); the second runs to `task_incomplete`. The suite
exits 0 with a suite receipt that `harness audit` finds valid and that says all of this:
executor slurm, member 0000 cancelled (SIGTERM, exit 143), member 0001 finished, one at
a time (each asks for the node's 2 CPUs), and every member's receipt names the suite's
ticket, suite run and member slot. A second run with the same ticket is refused before
anything runs. Real guests: run under the machine's VM lock (116 s measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.dispatch import read_ticket
from receipts.audit.suite import audit_suite_and_read
from receipts.records import DispatchRecord, TrialRecord
from receipts.records.legacy import suite_dispatch
from tests.harness.cleanclone import clean_clone, dirt
from tests.harness.suite.slurmcluster import slurm_up

pytestmark = pytest.mark.integration
SUITE = """
name = "slurm-check"
tasks = ["polyglot-py-bowling"]
profiles = ["tiny"]
agents = ["scripted:oracle", "scripted:null"]
"""
RUNNING_S = 20.0
"""How long the first member's job runs before the operator's scancel: inside its VM."""


def job_of(workdir: Path, name: str) -> tuple[str, str] | None:
    """(job id, state) of this suite's job `name` (its jobs run in the clone)."""
    listed = subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i|%j|%T|%Z"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    for line in listed.stdout.splitlines():
        job_id, job_name, state, where = line.split("|", 3)
        if job_name == name and Path(where) == workdir:
            return job_id, state
    return None


def test_a_dispatched_suite_on_slurm_with_one_member_scancelled(tmp_path: Path) -> None:
    slurm_up()
    clone = clean_clone(tmp_path / "clone")
    state, out = tmp_path / "state", tmp_path / "out"
    suite_file = tmp_path / "slurm-check.toml"
    suite_file.write_text(SUITE)
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),
        "XDG_STATE_HOME": str(state),
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    issued = harness("dispatch", "issue", "--suite", str(suite_file))
    assert issued.returncode == 0, issued.stderr
    ticket = Path(issued.stdout.strip())
    digest = read_ticket(ticket).digest()
    run = ("suite", "run", str(suite_file), "--executor", "slurm", "--dispatch", str(ticket))
    suite = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *run, "--out", str(out), "--json"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 900
    while (found := job_of(clone, "harness-0000")) is None or found[1] != "RUNNING":
        assert suite.poll() is None and time.monotonic() < deadline, "0000 never ran"
        time.sleep(0.5)
    time.sleep(RUNNING_S)
    assert subprocess.run(["scancel", found[0]], check=False, timeout=30).returncode == 0
    stdout, _ = suite.communicate(timeout=1200)
    assert suite.returncode == 0, stdout
    summary = json.loads(stdout)
    assert (summary["valid"], summary["members"], summary["members_with_receipt"]) == (
        True,
        2,
        2,
    )

    receipt = Path(summary["suite"])
    result, record, members = audit_suite_and_read(receipt.read_bytes())
    assert result.valid and record is not None, result.findings
    assert (record.executor, record.max_concurrency, suite_dispatch(record)) == ("slurm", 1, digest)
    cancelled, finished = record.members
    assert (cancelled.state, cancelled.exit_code, cancelled.verdict) == (
        "cancelled",
        143,
        "cancelled",
    )
    assert (finished.state, finished.exit_code, finished.verdict) == (
        "finished",
        1,
        "task_incomplete",
    )
    assert [(v.verdict, v.count) for v in record.verdicts] == [
        ("cancelled", 1),
        ("task_incomplete", 1),
    ]
    trial = members["0000"].trial
    assert isinstance(trial, TrialRecord) and trial.cancel_signal == "SIGTERM"
    for member_id, records in members.items():
        named = records.dispatch
        assert isinstance(named, DispatchRecord)
        assert (named.category, named.scope, named.dispatch_sha256) == ("ok", "suite", digest)
        assert (named.suite_id, named.member_id) == (record.suite_id, member_id)

    audited = harness("audit", str(receipt))
    assert audited.returncode == 0, audited.stdout
    again = harness(*run, "--out", str(tmp_path / "again"))
    assert again.returncode == 2 and "already_consumed" in again.stderr
    assert not (tmp_path / "again").exists()
    assert dirt(clone) == ""
