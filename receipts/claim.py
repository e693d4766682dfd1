"""What a trial's receipt may claim, computed once for the writer and the audit.

Why one home: a summary's totals and the set of records a failed trial keeps are rules
about the evidence. Written twice (once where the harness builds the receipt, once where
the audit checks it), the two copies can disagree, and then the harness writes receipts
that fail its own audit. Here each rule is a pure function of the records. The totals
a summary record carries are in receipts/totals.py (the guest's agent computes them
too, without this module's imports).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from receipts.records import TrialRecord
from receipts.records.legacy import AnyTrialRecord, cancelled_stage
from receipts.records.trial import STAGE_ORDER, Stage
from receipts.recordset import RecordSet
from receipts.verdict import derive_verdict, first_failed_stage, required_stages


def _index(stage: Stage) -> int:
    return STAGE_ORDER.index(stage)


def void_from(records: RecordSet) -> Stage | None:
    """The first stage whose record the trial may not claim: the stage the harness failed
    in or a stop signal cancelled (what it did is void, and everything after it), or the
    stage after the first failed one (a stage can be found failed only after a later one
    ran, e.g. the guest worker's death is read when it is stopped, after the agent: the
    first failure is the verdict, and what ran after it is not part of the claim)."""
    trial = records.trial
    failed = first_failed_stage(records)
    if trial is None or failed is None:
        return None
    if failed in (trial.internal_error_stage, cancelled_stage(trial)):
        return failed
    after = _index(failed) + 1
    return STAGE_ORDER[after] if after < len(STAGE_ORDER) else None


def may_claim(stage: Stage, void: Stage | None) -> bool:
    """Whether a stage's record belongs to the trial's claim (before `void_from`)."""
    return void is None or _index(stage) < _index(void)


def crash_stage(records: RecordSet, running: Stage) -> Stage | None:
    """Where a defect of the harness is recorded when it ended the trial while `running`:
    that stage, or an earlier required stage whose record it never finished writing (the
    worker's, kept only after the agent), whichever comes first; None when a recorded
    failure comes before it (the first failure names the trial)."""
    assert records.trial is not None
    missing = [s for s in required_stages(records.trial) if records.stage_record(s) is None]
    crashed = min([running, *missing], key=_index)
    failed = first_failed_stage(records)
    return crashed if failed is None or _index(crashed) <= _index(failed) else None


def _without_void(records: RecordSet, void: Stage | None) -> RecordSet:
    if void is None:
        return records
    drop: dict[str, Any] = {s: None for s in STAGE_ORDER if not may_claim(s, void)}
    if not may_claim("verification", void):  # the verification guest goes with its stage
        drop["verifier_vm"] = None
    if not may_claim("worker", void):
        drop["worker_requests"] = ()
    if not may_claim("agent", void):
        drop["agent_turns"], drop["tool_calls"] = (), ()
    return dataclasses.replace(records, **drop)


def _with_trial(records: RecordSet, trial: AnyTrialRecord, **changes: Any) -> RecordSet:
    data = trial.model_dump(by_alias=True)
    data.update(changes)
    return dataclasses.replace(records, trial=type(trial).model_validate(data))


def claim(collected: RecordSet, crashed_in: Stage | None = None) -> RecordSet:
    """The receipt's records from what a trial collected: `collected.trial` states what
    was asked for (no failed stage, no internal error, any verdict); `crashed_in` is the
    stage running when a defect of ours ended the trial. Records the trial may not claim
    are dropped (`void_from`, the rule the audit checks), then the failed stage and the
    verdict are derived from what is left (receipts/verdict.py)."""
    trial = collected.trial
    assert isinstance(trial, TrialRecord)
    records = collected
    if crashed_in is not None:
        records = _with_trial(records, trial, internal_error_stage=crash_stage(records, crashed_in))
    records = _without_void(records, void_from(records))
    assert records.trial is not None
    records = _with_trial(records, records.trial, failed_stage=first_failed_stage(records))
    assert records.trial is not None
    return _with_trial(records, records.trial, verdict=derive_verdict(records))
