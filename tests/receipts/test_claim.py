"""receipts/claim.py: what a trial may claim, the one rule the writer and the audit share.

Each case feeds `claim` what a harness would have collected (the builders' complete
trial, with the change a failure makes) and checks the receipt it makes: which records
are kept, the claimed failure and verdict, and that the audit finds it valid. The
audit's `required_records` rule reads the same `void_from`, so a writer that kept a
record after the first failure would write a receipt its own audit refuses.
"""

from __future__ import annotations

from pathlib import Path

from receipts.audit import audit_bytes
from receipts.bundle import write_bundle
from receipts.claim import claim, crash_stage, may_claim, void_from
from receipts.recordset import RecordSet
from tests.receipts.builders import accepted_model_trial, replace, with_changes


def _collected(**changes: object) -> RecordSet:
    """The complete trial as collected: the trial record states only what was asked."""
    records = accepted_model_trial()
    assert records.trial is not None
    trial = replace(records.trial, verdict="evidence_incomplete", failed_stage=None)
    return with_changes(records, trial=trial, **changes)


def _valid(records: RecordSet, tmp_path: Path) -> bool:
    target = tmp_path / f"trial-{len(list(tmp_path.iterdir()))}.zip"
    write_bundle(records, target)
    return audit_bytes(target.read_bytes()).valid


def test_a_complete_trial_claims_everything(tmp_path: Path) -> None:
    collected = _collected()
    records = claim(collected)
    assert records.trial is not None
    assert (records.trial.verdict, records.trial.failed_stage) == ("accepted", None)
    assert records.agent == collected.agent and records.worker_requests
    assert _valid(records, tmp_path)


def test_a_failure_found_late_voids_what_ran_after_it(tmp_path: Path) -> None:
    """The guest worker's death is read when it is stopped, after the agent ran: the
    worker is the failure, and the agent's records (turns and tool calls too) are void."""
    base = accepted_model_trial()
    assert base.worker is not None
    collected = _collected(worker=replace(base.worker, category="worker_exited"))
    assert void_from(collected) == "agent"
    records = claim(collected)
    assert records.trial is not None
    assert (records.trial.verdict, records.trial.failed_stage) == ("failed_worker", "worker")
    assert records.agent is None and records.verification is None
    assert records.verifier_vm is None  # the verification guest goes with its stage
    assert records.agent_turns == () and records.tool_calls == ()
    assert records.worker_requests == collected.worker_requests  # the worker's own stage
    assert _valid(records, tmp_path)
    assert not _valid(with_changes(records, agent=collected.agent), tmp_path)


def test_a_crash_names_the_first_stage_without_its_record(tmp_path: Path) -> None:
    """A defect while the agent ran, before the worker's record was written (it is
    written after the agent): the crash is claimed at the worker stage."""
    collected = _collected(worker=None, agent=None, verification=None, verifier_vm=None)
    assert crash_stage(collected, "agent") == "worker"
    records = claim(collected, crashed_in="agent")
    assert records.trial is not None
    assert records.trial.internal_error_stage == "worker"
    assert records.trial.verdict == "failed_internal"
    assert records.worker_requests == () and records.agent_turns == ()
    assert _valid(records, tmp_path)


def test_a_crash_after_a_recorded_failure_is_not_the_claim(tmp_path: Path) -> None:
    """A recorded failure comes first: a defect later in teardown of the stages does not
    replace it, and the records after the failure are void as for any failure. Before
    this rule was shared, the writer kept the agent's record after a failed worker when
    a crash followed, and the audit refused the receipt (record_unexpected)."""
    base = accepted_model_trial()
    assert base.worker is not None
    collected = _collected(worker=replace(base.worker, category="worker_exited"))
    assert crash_stage(collected, "verification") is None
    records = claim(collected, crashed_in="verification")
    assert records.trial is not None
    assert records.trial.internal_error_stage is None
    assert records.trial.verdict == "failed_worker" and records.agent is None
    assert _valid(records, tmp_path)


def test_may_claim_is_before_the_void_stage() -> None:
    assert may_claim("verification", None)
    assert may_claim("worker", "agent") and not may_claim("agent", "agent")
    assert not may_claim("verification", "agent")


def test_a_crash_in_the_stage_that_recorded_a_failure_is_the_claim(tmp_path: Path) -> None:
    """A recorded failure only outranks a crash that comes after it: a defect of ours in
    the very stage whose record says it failed is named as that stage's internal error
    (the record may be the defect's doing)."""
    base = accepted_model_trial()
    assert base.worker is not None
    collected = _collected(worker=replace(base.worker, category="worker_exited"))
    assert crash_stage(collected, "worker") == "worker"
    records = claim(collected, crashed_in="worker")
    assert records.trial is not None
    assert records.trial.internal_error_stage == "worker"
    assert records.trial.verdict == "failed_internal"
    assert _valid(records, tmp_path)
