"""The documented one-shot dispatch flow, step by step, from a clean clone (README,
docs/ci/trial-dispatch.yml): issue, trial, second use refused, list.

Each step is the command a CI owner types, run as a process from inside a fresh clone
of the code under test, with the state directory ($XDG_STATE_HOME) in a temporary
directory. The trial is a real one (tiny profile, scripted agent, real VM): run it under
the machine's VM lock. After every step the clone's tree is still clean, which is what
the dispatched trial itself checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.dispatch import read_ticket
from tests.harness.cleanclone import clean_clone, dirt

pytestmark = pytest.mark.integration

SCRIPT = "scripted:profiles/tasks/py-one-line-fix/scripts/solution.json"


def test_issue_trial_second_use_refused_list(tmp_path: Path) -> None:
    clone = clean_clone(tmp_path / "clone")
    state = tmp_path / "state"
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),  # the clone's own harness code runs
        "XDG_STATE_HOME": str(state),
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=1200,
        )

    issued = harness("dispatch", "issue", "--profile", "tiny")
    assert issued.returncode == 0, issued.stderr
    ticket = Path(issued.stdout.strip())
    assert ticket.parent == state / "harness" / "tickets"
    assert dirt(clone) == ""

    trial = ("trial", "--profile", "tiny", "--agent", SCRIPT, "--dispatch", str(ticket))
    first = harness(*trial, "--json")
    assert first.returncode == 0, first.stderr[-4000:]
    result = json.loads(first.stdout)
    assert (result["verdict"], result["valid"]) == ("accepted", True)
    receipt = Path(result["receipt"])
    assert receipt.parent == state / "harness" / "receipts"  # outside the checkout
    assert dirt(clone) == ""
    audited = harness("audit", str(receipt))
    assert audited.returncode == 0, audited.stdout + audited.stderr
    with zipfile.ZipFile(receipt) as archive:
        dispatch = json.loads(archive.read("dispatch.json"))
    digest = read_ticket(ticket).digest()
    assert (dispatch["category"], dispatch["dispatch_sha256"]) == ("ok", digest)

    second = harness(*trial, "--json")
    assert second.returncode == 3, second.stderr[-4000:]
    refused = json.loads(second.stdout)
    assert (refused["verdict"], refused["valid"]) == ("failed_dispatch", True)
    with zipfile.ZipFile(refused["receipt"]) as archive:
        assert json.loads(archive.read("dispatch.json"))["category"] == "already_consumed"
    assert dirt(clone) == ""

    listed = harness("dispatch", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{digest}  20")
