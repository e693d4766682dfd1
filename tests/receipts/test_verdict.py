"""The verdict is derived from the records, in a fixed order of judgement."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from harness.trial.guestrecords import unread_verification_record
from receipts.records import FacetComparison
from receipts.records.hostreading import HOST_READINGS
from receipts.recordset import RecordSet
from receipts.verdict import derive_verdict, first_failed_stage
from tests.receipts.builders import (
    accepted_model_trial,
    accepted_scripted_trial,
    hoststate,
    replace,
)


def _base() -> RecordSet:
    return accepted_model_trial()


def test_complete_passing_trial_is_accepted() -> None:
    assert derive_verdict(_base()) == "accepted"
    assert derive_verdict(accepted_scripted_trial()) == "accepted"


def test_failed_hidden_tests_are_task_incomplete() -> None:
    records = _base()
    assert records.verification is not None
    failed = replace(records.verification, result="failed", tests_failed=1)
    assert derive_verdict(dataclasses.replace(records, verification=failed)) == "task_incomplete"


def test_a_pass_judged_in_process_is_never_plain_accepted() -> None:
    """The hidden tests passed in the solution's own process: `accepted_unguarded`.
    A trial/3 receipt (older rules, no such verdict) keeps `accepted`.
    Mutation control: unguarded_pass returning False -> the first assertion fails."""
    from receipts.records.legacy import TrialRecordV3, VerificationRecordV3

    records = _base()
    assert records.verification is not None and records.trial is not None
    in_process = replace(records.verification, judge="in_process")
    assert derive_verdict(dataclasses.replace(records, verification=in_process)) == (
        "accepted_unguarded"
    )
    old_trial = TrialRecordV3.model_validate_json(
        records.trial.model_dump_json(by_alias=True).replace("trial/4", "trial/3")
    )
    old_verification = VerificationRecordV3.model_validate_json(
        in_process.model_dump_json(by_alias=True).replace("verification/4", "verification/3")
    )
    old = dataclasses.replace(records, trial=old_trial, verification=old_verification)
    assert derive_verdict(old) == "accepted"


@pytest.mark.parametrize(
    ("stage", "category"),
    [
        ("preflight", "memory_below_floor"),
        ("image", "build_failed"),
        ("vm", "boot_timeout"),
        ("gate", "pycache_present"),
        ("worker", "model_load_failed"),
        ("agent", "worker_error"),
        ("verification", "timeout"),
        ("model", "pin_digest_mismatch"),
        ("source", "unread"),
    ],
)
def test_first_failed_stage_names_the_verdict(stage: str, category: str) -> None:
    records = _base()
    record = getattr(records, stage)
    records = dataclasses.replace(records, **{stage: replace(record, category=category)})
    assert first_failed_stage(records) == stage
    assert derive_verdict(records) == f"failed_{stage}"


def test_agent_budget_stop_is_not_a_stage_failure() -> None:
    records = _base()
    assert records.agent is not None
    records = dataclasses.replace(records, agent=replace(records.agent, category="turn_limit"))
    assert derive_verdict(records) == "accepted"


@pytest.mark.parametrize("missing", ["preflight", "vm", "verification", "hoststate", "worker"])
def test_missing_evidence_is_never_accepted(missing: str) -> None:
    changes: dict[str, Any] = {missing: None}
    records = dataclasses.replace(_base(), **changes)
    assert derive_verdict(records) == "evidence_incomplete"


def test_no_cleanup_receipts_is_never_accepted() -> None:
    assert derive_verdict(dataclasses.replace(_base(), cleanup=())) == "evidence_incomplete"


@pytest.mark.parametrize("resource", ["qemu_process", "worker_socket", "data_disk"])
def test_a_missing_required_cleanup_receipt_is_never_accepted(resource: str) -> None:
    """One receipt the records require dropped (receipts/cleanupset.py): every kept one is
    confirmed, yet the verdict is evidence_incomplete. Mutation control: without the
    `missing_cleanup` check in derive_verdict this is `accepted`."""
    records = _base()
    drop = next(c for c in records.cleanup if c.resource == resource)
    cleanup = tuple(c for c in records.cleanup if c is not drop)
    assert derive_verdict(dataclasses.replace(records, cleanup=cleanup)) == "evidence_incomplete"


@pytest.mark.parametrize("where", ["vm", "worker", "verifier_vm"])
def test_an_unread_oom_count_anywhere_is_never_accepted(where: str) -> None:
    """Each half of the OOM check, the VM's and the worker's and the verifier's."""
    records = _base()
    records = dataclasses.replace(
        records, **{where: replace(getattr(records, where), oom_kills=None)}
    )
    assert derive_verdict(records) == "evidence_incomplete"


def test_a_verification_guest_killed_over_its_budget_is_failed_oom() -> None:
    """The verifier's QEMU OOM-killed: verification is the host's `verifier_vm_failed`,
    and the budget names the verdict. Mutation control: without `_verifier_oom` this is
    failed_verification."""
    records = _base()
    assert records.verifier_vm is not None and records.trial is not None
    records = dataclasses.replace(
        records,
        verification=unread_verification_record("verifier_vm_failed"),
        verifier_vm=replace(records.verifier_vm, category="oom_killed", oom_kills=1),
    )
    assert derive_verdict(records) == "failed_oom"


def test_an_oom_killed_verifier_guest_does_not_rename_an_earlier_failure() -> None:
    """The verifier guest's OOM names the verdict only when verification is the stage that
    failed: an agent that failed first stays `failed_agent`, whatever the verifier guest's
    record says. Mutation control (cosmic-ray, _verifier_oom): `and guest is not None`
    turned into `or guest is not None` made this failed_oom."""
    records = _base()
    assert records.verifier_vm is not None and records.agent is not None
    records = dataclasses.replace(
        records,
        agent=replace(records.agent, category="worker_error"),
        verifier_vm=replace(records.verifier_vm, category="oom_killed", oom_kills=1),
    )
    assert first_failed_stage(records) == "agent"
    assert derive_verdict(records) == "failed_agent"


@pytest.mark.parametrize(
    ("status", "verdict"), [("failed", "failed_teardown"), ("not_acquired", "evidence_incomplete")]
)
def test_cleanup_not_confirmed(status: str, verdict: str) -> None:
    records = _base()
    cleanup = (replace(records.cleanup[0], status=status), *records.cleanup[1:])
    assert derive_verdict(dataclasses.replace(records, cleanup=cleanup)) == verdict


@pytest.mark.parametrize(
    ("result", "verdict"), [("changed", "failed_host_state"), ("unread", "evidence_incomplete")]
)
def test_host_state_must_be_unchanged(result: str, verdict: str) -> None:
    facet = FacetComparison(
        before_sha256="1" * 64,
        after_sha256=None,
        result=result,
        raw_bytes="unread",
        excluded_before=0,
        excluded_after=0,
        unrelated_before=0,
        unrelated_after=0,
    )
    records = dataclasses.replace(_base(), hoststate=hoststate(firewall=facet))
    assert derive_verdict(records) == verdict


@pytest.mark.parametrize("where", ["vm", "worker", "verifier_vm"])
def test_any_oom_kill_fails_the_trial(where: str) -> None:
    records = _base()
    records = dataclasses.replace(records, **{where: replace(getattr(records, where), oom_kills=1)})
    assert derive_verdict(records) == "failed_oom"


def test_unread_oom_count_is_never_accepted() -> None:
    records = _base()
    assert records.vm is not None
    records = dataclasses.replace(records, vm=replace(records.vm, oom_kills=None))
    assert derive_verdict(records) == "evidence_incomplete"


def test_scripted_trials_do_not_need_model_or_worker() -> None:
    records = accepted_scripted_trial()
    assert records.model is None and records.worker is None
    assert derive_verdict(records) == "accepted"


def test_dispatched_trial_needs_its_dispatch_record() -> None:
    records = _base()
    assert records.trial is not None
    records = dataclasses.replace(records, trial=replace(records.trial, dispatched=True))
    assert derive_verdict(records) == "evidence_incomplete"


@pytest.mark.parametrize("stage", ["vm", "worker"])
def test_a_stage_ended_by_its_oom_killer_is_failed_oom(stage: str) -> None:
    """The budget names the failure: a VM (or worker) killed over its memory budget is
    `failed_oom`, while the failed stage is still the one it happened in."""
    records = _base()
    record = replace(getattr(records, stage), category="oom_killed", oom_kills=1)
    records = dataclasses.replace(records, **{stage: record})
    assert first_failed_stage(records) == stage
    assert derive_verdict(records) == "failed_oom"


def test_a_crash_of_the_harness_is_failed_internal_at_its_stage() -> None:
    records = _base()
    assert records.trial is not None
    crashed = replace(records.trial, internal_error_stage="agent")
    records = dataclasses.replace(
        records,
        trial=crashed,
        agent=None,
        verification=None,
        verifier_vm=None,
        agent_turns=(),
        tool_calls=(),
    )
    assert first_failed_stage(records) == "agent"
    assert derive_verdict(records) == "failed_internal"


def test_an_earlier_failed_stage_wins_over_a_later_crash() -> None:
    records = _base()
    assert records.trial is not None and records.image is not None
    records = dataclasses.replace(
        records,
        trial=replace(records.trial, internal_error_stage="agent"),
        image=replace(records.image, category="build_failed"),
    )
    assert derive_verdict(records) == "failed_image"


def test_a_crash_claimed_for_a_stage_not_run_is_never_accepted() -> None:
    records = accepted_scripted_trial()
    assert records.trial is not None
    records = dataclasses.replace(
        records, trial=replace(records.trial, internal_error_stage="worker")
    )
    assert first_failed_stage(records) is None
    assert derive_verdict(records) == "failed_internal"


@pytest.mark.parametrize("reading", sorted(HOST_READINGS))
def test_every_host_reading_of_the_agent_fails_the_agent_stage(reading: str) -> None:
    """A host reading means the agent's record was not read (refused, or its command ended
    without one): the agent did not run to an end of its own, so the verdict is
    failed_agent, never the hidden tests' say. Mutation control: HOST_READINGS outside
    AGENT_FAILURES makes every case `accepted`."""
    records = _base()
    assert records.agent is not None
    agent = replace(
        records.agent,
        category=reading,
        turns=0,
        tool_calls=0,
        processes_left=None,
        agent_cgroup="unread",
    )
    records = dataclasses.replace(records, agent=agent, agent_turns=(), tool_calls=())
    assert first_failed_stage(records) == "agent"
    assert derive_verdict(records) == "failed_agent"
