"""A trial given what its stages would have collected, bundled by the real writer and
audited by the real audit: the trial tests that check one stage's record without a VM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.cli import main
from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.evidence import StageFailed
from harness.trial.guests import Guest
from harness.trial.pipeline import Trial, TrialResult
from host.release import CleanupResult
from receipts.records import HostStateRecord, ToolCallRecord, WorkerRequestRecord
from receipts.recordset import RecordSet

TASKS = Path(__file__).parents[3] / "profiles" / "tasks"
SOLUTION = TASKS / "py-one-line-fix" / "scripts" / "solution.json"
VERIFIED_TREE = "1" * 64
"""The builders' verification record's `workspace_sha256`: what the host carried there."""
STAGE_SINGLES = ("preflight", "source", "model", "image", "vm", "gate", "worker", "agent")


def new_trial(tmp_path: Path, scripted: bool) -> Trial:
    return Trial(
        TrialOptions(
            profile=load_profile("tiny"),
            task="py-one-line-fix",
            script=SOLUTION if scripted else None,
            out_dir=tmp_path,
            accel="tcg",
        )
    )


def collect(trial: Trial, records: RecordSet, **singles: Any) -> None:
    """Give the trial what its stages would have collected."""
    for name in (*STAGE_SINGLES, "verification"):
        value = singles.get(name, getattr(records, name))
        if value is not None:
            trial.evidence.put(name, value)
    calls = tuple(c for c in records.tool_calls if isinstance(c, ToolCallRecord))
    assert len(calls) == len(records.tool_calls), "a trial collects current records only"
    trial.evidence.turns, trial.evidence.tool_calls = records.agent_turns, calls
    requests = tuple(r for r in records.worker_requests if isinstance(r, WorkerRequestRecord))
    assert len(requests) == len(records.worker_requests), "a trial collects current records only"
    trial.evidence.worker_requests = requests


def bundle(trial: Trial, records: RecordSet) -> TrialResult:
    cleanup = [
        CleanupResult(c.resource, c.status, c.evidence, c.duration_ms) for c in records.cleanup
    ]
    assert isinstance(records.hoststate, HostStateRecord)
    return trial.bundle(1_790_000_000_000, cleanup, records.hoststate)


def model_options(tmp_path: Path) -> TrialOptions:
    return TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path,
        accel="tcg",
    )


RUNTIME = cast(Any, SimpleNamespace(pins_sha256="c" * 64))
MODEL = cast(Any, SimpleNamespace(record=SimpleNamespace(gguf_sha256="a" * 64)))


def in_guest(tmp_path: Path, guest: Guest) -> Trial:
    """A model-driven trial whose agent guest is `guest`."""
    trial = Trial(model_options(tmp_path))
    trial.guests.agent = guest
    return trial


def run_stage(stage: Callable[[], Coroutine[Any, Any, None]]) -> bool:
    """Run one stage; whether it ended the trial (StageFailed)."""
    try:
        asyncio.run(stage())
    except StageFailed:
        return True
    return False


def audit_exit(receipt: Path, capsys: pytest.CaptureFixture[str]) -> int:
    status = main(["audit", str(receipt)])
    capsys.readouterr()
    return status
