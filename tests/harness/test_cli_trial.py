"""`harness trial` refuses what it cannot honestly run, before any stage starts; the
backend it drives is the one its record names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.pipeline import Trial
from host.vm.libvirt_backend import LibvirtBackend
from host.vm.qemu import QemuBackend
from receipts.vocabulary import Backend

REPO = Path(__file__).parents[2]


@pytest.mark.parametrize("backend", ["qemu", "libvirt"])
def test_trial_drives_the_backend_it_records(backend: Backend, tmp_path: Path) -> None:
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path,
        backend=backend,
    )
    assert Trial(options).context.backend.name == backend
    other = QemuBackend() if backend == "libvirt" else LibvirtBackend()
    with pytest.raises(ValueError, match="backend"):
        Trial(options, backend=other)


def test_unreadable_script_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "trial", "--profile", "tiny"),
            *("--agent", f"scripted:{tmp_path / 'missing.json'}", "--out", str(tmp_path)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert "script file is not readable" in done.stderr
    assert list(tmp_path.iterdir()) == []


def _harness(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "HOME": str(home)},
    )


def _lines(stdout: str) -> dict[str, str]:
    return {line[:12].strip(): line[12:].strip() for line in stdout.splitlines() if line}


def test_a_trial_without_pins_says_why_and_how_to_fix_it(tmp_path: Path) -> None:
    """A real `harness trial --profile qwen4b` on a machine where nobody pinned it (a
    fresh HOME): the failed stage, its category and the fixing command, in human and
    JSON output, and the same from `harness audit` reading the receipt. (A host short of
    the profile's 14 GiB memory floor stops it earlier, at preflight: that too has a fix.)
    Mutation controls: the remedy table's entry removed; the lines not printed."""
    trial = _harness(tmp_path, "trial", "--profile", "qwen4b", "--out", str(tmp_path / "out"))
    assert trial.returncode == 3, trial.stderr[-2000:]
    shown = _lines(trial.stdout)
    expected = {
        "model: pins_missing": "harness model pin --profile qwen4b --source DIR",
        "preflight: memory_below_floor": "harness doctor  (free host memory up to the "
        "profile's admission floor)",
    }
    assert shown["failed"] in expected, trial.stdout
    assert shown["fix"] == expected[shown["failed"]]
    receipt = Path(shown["receipt"])

    audit = _harness(tmp_path, "audit", str(receipt))
    assert audit.returncode == 0
    assert _lines(audit.stdout)["failed"] == shown["failed"]
    assert _lines(audit.stdout)["fix"] == shown["fix"]
    payload = json.loads(_harness(tmp_path, "audit", "--json", str(receipt)).stdout)
    stage, _, category = shown["failed"].partition(": ")
    assert (payload["failed_stage"], payload["failed_category"]) == (stage, category)
    assert payload["remedy"] in {"model_pin", "free_memory"}

    as_json = _harness(tmp_path, "trial", "--profile", "qwen4b", "--json", "--out", str(tmp_path))
    assert as_json.returncode == 3
    fields = json.loads(as_json.stdout)
    assert (fields["failed_stage"], fields["failed_category"]) == (stage, category)
    assert fields["remedy"] == payload["remedy"] and fields["fix"] == shown["fix"]


def test_only_a_guarded_pass_exits_zero() -> None:
    """CI reads the exit status: an unguarded pass (judged in the solution's own process)
    is never 0. Mutation control: `accepted_unguarded` mapped to EXIT_ACCEPTED -> fails."""
    from typing import get_args

    from harness.commands.trial import verdict_exit_status
    from receipts.records.trial import Verdict

    statuses = {verdict: verdict_exit_status(verdict) for verdict in get_args(Verdict)}
    assert statuses.pop("accepted") == 0
    assert statuses.pop("accepted_unguarded") == 5
    assert statuses.pop("task_incomplete") == 1
    assert set(statuses.values()) == {3}
