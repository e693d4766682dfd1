"""Trial.cancel, without a VM: what the pipeline records when a stop signal arrives.

The real `Trial.run` (lease, host snapshots, teardown, bundle, audit) runs; only the
stages are replaced by one that keeps the records a real trial would have kept up to
the agent stage and then waits there, as the agent's long SSH command does. The
real-process, real-VM form of all this is test_signal_trial_vm.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.pipeline import Trial, TrialResult
from harness.trial.stage import TrialState
from host.release import CleanupResult
from receipts.audit import audit_and_read
from receipts.ownership import GUEST_OWNS
from receipts.records import ToolCallRecord, TrialRecord
from receipts.records.trial import Stage
from receipts.recordset import RecordSet
from tests.receipts.builders import accepted_scripted_trial

SOLUTION = Path(__file__).parents[3] / "profiles/tasks/py-one-line-fix/scripts/solution.json"
BEFORE_AGENT: tuple[Stage, ...] = ("preflight", "source", "image", "vm", "gate")


def _own_the_records_resources(trial: Trial, records: RecordSet) -> None:
    """Register, as owned, the resources the kept records say the trial had (the VM,
    its cgroup...), releasing with the builders' receipts: the audit requires a cleanup
    receipt for each (receipts/cleanupset.py)."""

    async def release() -> tuple[CleanupResult, ...]:
        return tuple(
            CleanupResult(c.resource, c.status, c.evidence, c.duration_ms)
            for c in records.cleanup
            if c.resource != "trial_scratch"  # the trial releases its own, for real
        )

    trial.owned.owner(GUEST_OWNS["qemu"]).register("qemu_process", release)  # stands for all


def _trial(tmp_path: Path) -> Trial:
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=SOLUTION,
        out_dir=tmp_path / "out",
        accel="tcg",
        cache=tmp_path / "cache",
    )
    trial = Trial(options)
    records = accepted_scripted_trial()
    reached_agent = asyncio.Event()

    async def stages(state: TrialState) -> None:
        for name in BEFORE_AGENT:
            trial.evidence.put(name, getattr(records, name))
        _own_the_records_resources(trial, records)
        trial.current = "agent"
        reached_agent.set()
        await asyncio.sleep(3600)  # the agent's command: only a cancel ends it
        assert records.agent is not None
        trial.evidence.put("agent", records.agent)

    trial.stages = stages  # type: ignore[method-assign]
    trial.reached_agent = reached_agent  # type: ignore[attr-defined]
    return trial


async def _cancelled(trial: Trial, signals: tuple[str, ...]) -> TrialResult:
    run = asyncio.ensure_future(trial.run())
    await trial.reached_agent.wait()  # type: ignore[attr-defined]
    for name in signals:
        trial.cancel(name)  # type: ignore[arg-type]
    return await asyncio.wait_for(run, 60)


def test_a_signal_cancels_the_running_stage_with_a_valid_receipt(tmp_path: Path) -> None:
    trial = _trial(tmp_path)
    result = asyncio.run(_cancelled(trial, ("SIGTERM",)))
    assert (result.valid, result.verdict) == (True, "cancelled")
    audited, records = audit_and_read(result.receipt.read_bytes())
    assert audited.valid and records is not None
    assert isinstance(records.trial, TrialRecord)
    assert (records.trial.cancelled_stage, records.trial.cancel_signal) == ("agent", "SIGTERM")
    assert records.agent is None and records.verification is None
    assert all(records.stage_record(name) is not None for name in BEFORE_AGENT)
    assert records.hoststate is not None
    assert "unread" not in {facet.result for facet in records.hoststate.facets()}
    assert trial.cancel_token.cancelled  # threads doing blocking work see it too
    assert not list((tmp_path / "cache" / "trials").glob("lease-*"))  # the lease is released
    scratch = [c for c in records.cleanup if c.resource == "trial_scratch"]
    assert [(c.status, c.evidence) for c in scratch] == [("confirmed", "directory_absent")]
    assert records.cleanup[-1].resource == "trial_scratch"  # acquired first, released last
    assert not list((tmp_path / "cache" / "trials").glob("harness-trial-*"))


def test_a_second_signal_hurries_past_the_host_state_read(tmp_path: Path) -> None:
    """Hurry: the host state is not read again, and says so (`unread`), never `unchanged`."""
    trial = _trial(tmp_path)
    result = asyncio.run(_cancelled(trial, ("SIGINT", "SIGTERM")))
    assert (result.valid, result.verdict) == (True, "cancelled")
    _, records = audit_and_read(result.receipt.read_bytes())
    assert records is not None and isinstance(records.trial, TrialRecord)
    assert records.trial.cancel_signal == "SIGINT"  # the first signal is the one that cancelled
    assert records.hoststate is not None
    assert {facet.result for facet in records.hoststate.facets()} == {"unread"}


def test_a_signal_during_teardown_cancels_nothing(tmp_path: Path) -> None:
    """After the last stage the evidence is complete: a signal during teardown (here,
    while an owned resource is being released) leaves no cancel in the receipt and the
    verdict is the records' own; the CLI still exits 130/143 (trial.stop_signal)."""
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=SOLUTION,
        out_dir=tmp_path / "out",
        accel="tcg",
        cache=tmp_path / "cache",
    )
    trial = Trial(options)
    records = accepted_scripted_trial()

    async def release() -> tuple[CleanupResult, ...]:
        trial.cancel("SIGTERM")
        return (CleanupResult("scratch_dir", "confirmed", "file_absent", 1),)

    async def stages(state: TrialState) -> None:
        for name in (*BEFORE_AGENT, "agent", "verification"):
            trial.evidence.put(name, getattr(records, name))
        _own_the_records_resources(trial, records)
        calls = tuple(c for c in records.tool_calls if isinstance(c, ToolCallRecord))
        trial.evidence.turns, trial.evidence.tool_calls = records.agent_turns, calls
        trial.owned.owner(GUEST_OWNS["qemu"]).register("scratch_dir", release)

    trial.stages = stages  # type: ignore[method-assign]
    result = asyncio.run(trial.run())
    assert result.valid and result.verdict != "cancelled"
    assert trial.stop_signal == "SIGTERM"
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and isinstance(read.trial, TrialRecord)
    assert (read.trial.cancelled_stage, read.trial.cancel_signal) == (None, None)
    assert read.verification is not None
