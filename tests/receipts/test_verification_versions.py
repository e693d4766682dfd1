"""verification/3 and /4 (where the hidden tests' assertions ran: `judge`) and old verification/2
receipts that still audit.

`fixtures/verification-v2-golden.zip` is a real old receipt: `bundle_bytes(accepted_model_trial())`
produced by the code of main at 35bb273 (the last commit that wrote
`harness.receipt.verification/2`) from `git archive`. Its SHA-256 is the golden digest
tests/receipts/test_bundle.py asserted at that commit.

All four `fixtures/*-golden.zip` were then re-forged once (2026-12-02), changing one
field: `model.json`'s `cache_key`, from the old builders' placeholder (`33…33`, which no
inputs give) to the key its own pins, converter and file type give (receipts/modelkey.py),
and the manifest entry for it. Real receipts always carried that key; the audit now
checks it (`model_cache_key`), and a placeholder would fail it. Every other byte of
every entry is the old writer's (checked entry by entry when re-forging).

Mutation controls: `VerificationRecordV2` left out of the kind's `legacy` ->
test_an_old_verification_v2_receipt_still_audits fails (the entry is an unknown
version); the `_judge_ran` validator removed -> test_judge_is_not_run_exactly_when_nothing_ran
fails.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pydantic
import pytest

from receipts.audit import audit_and_read
from receipts.records import VerificationRecord
from receipts.records.legacy import VerificationRecordV1, VerificationRecordV2
from tests.receipts.builders import accepted_model_trial, replace
from tests.receipts.legacy import fixture_entries

FIXTURE = Path(__file__).parent / "fixtures" / "verification-v2-golden.zip"
OLD_GOLDEN_ZIP_SHA256 = "24bad0e81c43ca10eb3cdce50f02cde7c8eaa4322b58001c94b8a59210940b18"


def test_an_old_verification_v2_receipt_still_audits() -> None:
    data = FIXTURE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == OLD_GOLDEN_ZIP_SHA256
    result, records = audit_and_read(data)
    assert result.valid, result.findings
    assert result.derived_verdict == result.claimed_verdict == "accepted"
    assert records is not None
    assert type(records.verification) is VerificationRecordV2


def test_the_current_record_says_where_the_judge_ran() -> None:
    verification = accepted_model_trial().verification
    assert type(verification) is VerificationRecord
    assert verification.schema_id() == "harness.receipt.verification/4"
    assert verification.judge == "split"
    data = verification.model_dump(by_alias=True)
    del data["judge"]
    with pytest.raises(pydantic.ValidationError):
        VerificationRecord.model_validate(data)


@pytest.mark.parametrize("judge", ["split", "in_process"])
def test_judge_is_not_run_exactly_when_nothing_ran(judge: str) -> None:
    """A host stand-in (nothing of the guest's was read) ran no judge, and a record the
    guest wrote after running the hidden command says which judge ran it."""
    verification = accepted_model_trial().verification
    assert verification is not None
    stand_in = {
        "category": "records_invalid",
        "result": "failed",
        "task_sha256": None,
        "final_diff_sha256": None,
        "workspace_sha256": None,
    }
    assert replace(verification, **stand_in, judge="not_run").judge == "not_run"
    with pytest.raises(pydantic.ValidationError):
        replace(verification, **stand_in, judge=judge)
    assert replace(verification, judge=judge).judge == judge
    with pytest.raises(pydantic.ValidationError):
        replace(verification, judge="not_run")


@pytest.mark.parametrize(
    "changes",
    [
        {"task_sha256": None},
        {"final_diff_sha256": None},
        {"category": "records_invalid", "result": "failed"},
        {"category": "records_invalid", "task_sha256": None, "final_diff_sha256": None},
    ],
)
def test_a_verification_1_record_lacks_digests_exactly_when_unread(
    changes: dict[str, object],
) -> None:
    """The oldest verification record the audit still reads keeps the rule of the
    current one: digests are absent exactly in the host's unread stand-in, which never
    passed. (A `/1` record without a task digest that passed would otherwise audit.)"""
    old = VerificationRecordV1.model_validate_json(fixture_entries()["verification.json"])
    assert old.result == "passed" and old.task_sha256 is not None
    unread = {"category": "records_invalid", "result": "failed"}
    stand_in = replace(old, **unread, task_sha256=None, final_diff_sha256=None)
    assert stand_in.task_sha256 is None  # the positive control
    with pytest.raises(pydantic.ValidationError):
        replace(old, **changes)
