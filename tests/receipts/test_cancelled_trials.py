"""A cancelled trial's receipt (trial/2), and old trial/1 receipts that still audit.

`fixtures/trial-v1-golden.zip` is a real old receipt: `bundle_bytes(accepted_model_trial())`
produced by the code of commit 33e6808 (the last commit that wrote
`harness.receipt.trial/1`) in a scratch worktree. Its SHA-256 is the golden digest
tests/receipts/test_bundle.py asserted at that commit.

All four `fixtures/*-golden.zip` were then re-forged once (2026-12-02), changing one
field: `model.json`'s `cache_key`, from the old builders' placeholder (`33…33`, which no
inputs give) to the key its own pins, converter and file type give (receipts/modelkey.py),
and the manifest entry for it. Real receipts always carried that key; the audit now
checks it (`model_cache_key`), and a placeholder would fail it. Every other byte of
every entry is the old writer's (checked entry by entry when re-forging).

A truthful cancelled receipt: the stages before the cancelled one present and
succeeded, the cancelled stage's record and every later one absent, cleanup and host
state recorded. Each tamper below changes one thing (re-forging the manifest) so only
the schema, consistency or verdict rules can catch it.

Mutation controls: `cancelled_stage` left out of `ended_early` in
consistency._required_records -> test_a_truthful_cancelled_receipt_is_valid fails
(record_missing); the `cancelled` branch removed from derive_verdict -> the same test and
test_the_verdict_of_a_cancel fail; the model validator removed -> the
signal-without-stage tamper fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from receipts.audit import audit_and_read, audit_bytes
from receipts.bundle import bundle_entries
from receipts.canonical import canonical
from receipts.records import TrialRecord
from receipts.records.legacy import TrialRecordV1
from receipts.records.trial import STAGE_ORDER
from receipts.recordset import RecordSet
from receipts.verdict import derive_verdict, first_failed_stage, required_stages
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial, replace, with_changes

FIXTURE = Path(__file__).parent / "fixtures" / "trial-v1-golden.zip"
OLD_GOLDEN_ZIP_SHA256 = "f0bd1ec43d9463ed5e3c79e273f334f2c80f54f4252cac47eb90e08cf511d180"
"""GOLDEN_ZIP_SHA256 of tests/receipts/test_bundle.py at 33e6808, before trial/2."""


def cancelled_at(stage: str, signal: str = "SIGTERM") -> RecordSet:
    """The accepted model trial, cancelled while `stage` ran: what the pipeline writes."""
    records = accepted_model_trial()
    assert records.trial is not None
    later = [s for s in STAGE_ORDER if STAGE_ORDER.index(s) >= STAGE_ORDER.index(stage)]
    voided: dict[str, Any] = {s: None for s in later}
    voided["verifier_vm"] = None  # the verification guest boots inside verification
    if STAGE_ORDER.index("worker") >= STAGE_ORDER.index(stage):
        voided["worker_requests"] = ()
    if STAGE_ORDER.index("agent") >= STAGE_ORDER.index(stage):
        voided.update(agent_turns=(), tool_calls=())
    trial = replace(
        records.trial,
        failed_stage=stage,
        cancelled_stage=stage,
        cancel_signal=signal,
        verdict="cancelled",
    )
    return with_changes(records, trial=trial, **voided)


def _categories(data: bytes) -> set[str]:
    return {finding.category for finding in audit_bytes(data).findings}


@pytest.mark.parametrize("stage", ["preflight", "image", "vm", "gate", "worker", "agent"])
def test_a_truthful_cancelled_receipt_is_valid(stage: str) -> None:
    result, records = audit_and_read(tamper.forge_records(cancelled_at(stage)))
    assert result.valid, result.findings
    assert result.derived_verdict == result.claimed_verdict == "cancelled"
    assert records is not None and isinstance(records.trial, TrialRecord)
    assert records.trial.cancelled_stage == stage


def test_the_verdict_of_a_cancel() -> None:
    records = cancelled_at("agent")
    assert first_failed_stage(records) == "agent"
    assert derive_verdict(records) == "cancelled"
    # A failure recorded before the cancelled stage keeps its own verdict.
    assert records.image is not None
    failed_first = dataclasses.replace(
        records, image=replace(records.image, category="build_failed")
    )
    assert derive_verdict(failed_first) == "failed_image"
    # Teardown's verdicts do not hide the cancel: it comes first, in stage order.
    failed_cleanup = dataclasses.replace(
        records, cleanup=(replace(records.cleanup[0], status="failed"), *records.cleanup[1:])
    )
    assert derive_verdict(failed_cleanup) == "cancelled"


def test_a_cancel_claimed_for_a_stage_not_run_is_never_accepted() -> None:
    records = accepted_model_trial()
    assert records.trial is not None
    claimed = replace(records.trial, cancelled_stage="dispatch", cancel_signal="SIGINT")
    records = dataclasses.replace(records, trial=claimed)
    assert "dispatch" not in required_stages(claimed)
    assert derive_verdict(records) == "cancelled"


def _trial_json(records: RecordSet) -> dict[str, Any]:
    assert records.trial is not None
    return records.trial.to_json()


def _with_trial(records: RecordSet, trial: dict[str, Any]) -> bytes:
    """`records` bundled with trial.json replaced, under a manifest that matches again."""
    return tamper.forge({**bundle_entries(records), "trial.json": canonical(trial)})


@pytest.mark.parametrize(
    ("story", "found"),
    [
        # the cancelled stage's own record kept: what it did is void
        ("record_of_cancelled_stage", "record_unexpected"),
        # the cancel erased from the claim, the voided records left absent
        ("cancel_removed", "record_missing"),
        # a cancelled trial claimed as accepted
        ("accepted_claimed", "verdict_mismatch"),
        # the cancelled stage moved later than where the records stop
        ("stage_moved_later", "record_missing"),
        # a signal without a stage, or a stage without its signal
        ("signal_without_stage", "schema_violation"),
        ("stage_without_signal", "schema_violation"),
        # cancelled and crashed at once
        ("cancelled_and_crashed", "schema_violation"),
        # a signal that is not a stop signal
        ("other_signal", "schema_violation"),
    ],
)
def test_tampered_cancel_claims_are_refused(story: str, found: str) -> None:
    records = cancelled_at("gate")
    trial = _trial_json(records)
    if story == "record_of_cancelled_stage":
        data = tamper.forge_records(dataclasses.replace(records, gate=accepted_model_trial().gate))
    else:
        edits: dict[str, dict[str, Any]] = {
            "cancel_removed": {"cancelled_stage": None, "cancel_signal": None},
            "accepted_claimed": {"verdict": "accepted"},
            "stage_moved_later": {"cancelled_stage": "agent", "failed_stage": "agent"},
            "signal_without_stage": {"cancelled_stage": None},
            "stage_without_signal": {"cancel_signal": None},
            "cancelled_and_crashed": {"internal_error_stage": "gate"},
            "other_signal": {"cancel_signal": "SIGKILL"},
        }
        data = _with_trial(records, {**trial, **edits[story]})
    assert found in _categories(data), audit_bytes(data).findings


# ---- trial/1: receipts of the harness before cancellation existed -----------------------


def _v1_entries() -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(FIXTURE.read_bytes())) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _v1_trial() -> dict[str, Any]:
    value = json.loads(_v1_entries()["trial.json"])
    assert isinstance(value, dict)
    return value


def test_the_fixture_is_the_old_writers_golden_receipt() -> None:
    assert hashlib.sha256(FIXTURE.read_bytes()).hexdigest() == OLD_GOLDEN_ZIP_SHA256
    trial = _v1_trial()
    assert trial["schema"] == "harness.receipt.trial/1"
    assert "cancelled_stage" not in trial and "cancel_signal" not in trial


def test_an_old_receipt_audits_valid_with_its_verdict() -> None:
    result, records = audit_and_read(FIXTURE.read_bytes())
    assert result.valid, result.findings
    assert result.derived_verdict == result.claimed_verdict == "accepted"
    assert records is not None and isinstance(records.trial, TrialRecordV1)


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        ({"cancelled_stage": "gate", "cancel_signal": "SIGTERM"}, "schema_extra_field"),
        ({"verdict": "cancelled"}, "schema_violation"),  # /1 had no such verdict
        ({"schema": "harness.receipt.trial/2"}, "schema_missing_field"),
        ({"schema": "harness.receipt.trial/3"}, "schema_missing_field"),
        ({"schema": "harness.receipt.trial/4"}, "schema_missing_field"),
        ({"schema": "harness.receipt.trial/5"}, "schema_mismatch"),
    ],
)
def test_versions_stay_closed(changes: dict[str, Any], found: str) -> None:
    entries = _v1_entries()
    entries["trial.json"] = canonical({**_v1_trial(), **changes})
    assert found in _categories(tamper.forge(entries))


def test_a_current_record_relabelled_as_v1_is_refused() -> None:
    records = cancelled_at("agent")
    trial = {**_trial_json(records), "schema": "harness.receipt.trial/1"}
    assert "schema_extra_field" in _categories(_with_trial(records, trial))
