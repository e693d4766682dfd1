"""The verdict, derived from the records. The one function both `harness trial` and
`harness audit` use, so the verdict a trial prints is the verdict a reviewer recomputes.

Order of judgement: the first stage (in pipeline order) in which the harness itself
failed (`failed_internal`), or whose record is missing (`evidence_incomplete`) or failed
(`failed_<stage>`, or `failed_oom` when the stage failed because its budget's OOM
killer acted) names the verdict; then teardown (every cleanup receipt confirmed), host
state (every facet unchanged), OOM kills (none); then the hidden tests decide between
`accepted` (or `accepted_unguarded`, when they ran in the solution's own process) and
`task_incomplete`. Missing or unread evidence never yields `accepted`.

A trial a stop signal cancelled (`cancelled_stage`) is judged like one the harness
failed in: the stages before it must be present and succeeded (a recorded failure
before the cancel keeps its own verdict), and the cancelled stage gives `cancelled`,
whatever teardown and host state say (they are recorded and audited all the same).
"""

from __future__ import annotations

from typing import cast

from receipts.cleanupset import missing_cleanup
from receipts.records.agent import AGENT_FAILURES, AgentRecord
from receipts.records.base import Record
from receipts.records.legacy import AgentRecordV1, AgentRecordV2, AnyTrialRecord, cancelled_stage
from receipts.records.trial import (
    STAGE_ORDER,
    Policy,
    PolicyV1,
    Stage,
    TrialRecord,
    Verdict,
)
from receipts.records.verification import VerificationRecord
from receipts.recordset import RecordSet


def trial_stages(*, dispatched: bool, policy: Policy | PolicyV1) -> tuple[Stage, ...]:
    """The stages a trial runs, in order: dispatch only when dispatched; model and worker
    only when a model chose the tool calls. The one answer for the writer and the audit:
    the pipeline runs exactly these (harness/trial/pipeline.py), and the verdict needs
    exactly their records."""
    skipped: set[Stage] = set()
    if not dispatched:
        skipped.add("dispatch")
    if policy == "scripted":
        skipped.update({"model", "worker"})
    return tuple(stage for stage in STAGE_ORDER if stage not in skipped)


def required_stages(trial: AnyTrialRecord) -> tuple[Stage, ...]:
    """The stages this trial must have run, by what its record says was asked for."""
    return trial_stages(dispatched=trial.dispatched, policy=trial.policy)


def stage_succeeded(record: Record) -> bool:
    """Whether a stage record reports success. An agent that stopped on one of its own
    budgets succeeded as a stage: whether the task was done is for verification."""
    category = getattr(record, "category", None)
    if isinstance(record, AgentRecord | AgentRecordV2 | AgentRecordV1):
        return category not in AGENT_FAILURES
    return category == "ok"


OOM_CATEGORY = "oom_killed"
"""The stage category (vm, worker) that says a memory budget's OOM killer ended the stage."""


def first_failed_stage(records: RecordSet) -> Stage | None:
    """The first required stage in which the harness failed, or whose record is present
    and reports failure."""
    if records.trial is None:
        return None
    ended_early = (records.trial.internal_error_stage, cancelled_stage(records.trial))
    for stage in required_stages(records.trial):
        if stage in ended_early:
            return stage
        record = records.stage_record(stage)
        if record is not None and not stage_succeeded(record):
            return stage
    return None


def _verifier_oom(records: RecordSet, stage: Stage) -> bool:
    """Verification failed because the verification guest's QEMU went over its budget."""
    verification, guest = records.verification, records.verifier_vm
    return (
        stage == "verification"
        and verification is not None
        and verification.category == "verifier_vm_failed"
        and guest is not None
        and guest.category == OOM_CATEGORY
    )


def derive_verdict(records: RecordSet) -> Verdict:
    trial = records.trial
    if trial is None:
        return "evidence_incomplete"
    cancelled = cancelled_stage(trial)
    for stage in required_stages(trial):
        if stage == trial.internal_error_stage:
            return "failed_internal"
        if stage == cancelled:
            return "cancelled"
        record = records.stage_record(stage)
        if record is None:
            return "evidence_incomplete"
        if not stage_succeeded(record):
            if getattr(record, "category", None) == OOM_CATEGORY or _verifier_oom(records, stage):
                return "failed_oom"  # the budget named the failure, not the stage
            return cast(Verdict, f"failed_{stage}")
    if trial.internal_error_stage is not None:
        return "failed_internal"  # claimed for a stage this trial does not run: never a pass
    if cancelled is not None:
        return "cancelled"  # claimed for a stage this trial does not run: never a pass
    if not records.cleanup or missing_cleanup(records):
        return "evidence_incomplete"  # a resource the records say was owned has no receipt
    statuses = {receipt.status for receipt in records.cleanup}
    if "failed" in statuses:
        return "failed_teardown"
    if statuses != {"confirmed"}:
        return "evidence_incomplete"
    if records.hoststate is None:
        return "evidence_incomplete"
    results = {facet.result for facet in records.hoststate.facets()}
    if "changed" in results:
        return "failed_host_state"
    if results != {"unchanged"}:
        return "evidence_incomplete"
    ooms = [
        record.oom_kills if record is not None else 0
        for record in (records.vm, records.worker, records.verifier_vm)
    ]
    if any(ooms):
        return "failed_oom"
    if None in ooms:
        return "evidence_incomplete"
    assert records.verification is not None  # a required stage, checked above
    if records.verification.result != "passed":
        return "task_incomplete"
    return "accepted_unguarded" if unguarded_pass(trial, records) else "accepted"


def unguarded_pass(trial: AnyTrialRecord, records: RecordSet) -> bool:
    """A pass the split judge did not guard: the hidden tests ran in the solution's own
    process (`judge = in_process`), so the solution's code could have written it. A
    `trial/4` receipt says so in its verdict; older versions named no such verdict."""
    verification = records.verification
    return (
        isinstance(trial, TrialRecord)
        and isinstance(verification, VerificationRecord)
        and verification.judge == "in_process"
    )
