"""The suite audit's dispatch binding: in a dispatched suite every member's receipt names
the suite's ticket, suite file, suite run and its own member slot; in an undispatched
suite no member carries a suite dispatch; suite/1 (before suite tickets) still audits.

Members are real trial receipts from the bundle writer (test_suite_receipt's builders),
with the dispatch record a member trial writes. Each tampering is what someone would try
to pass another run's receipt off as this suite's member.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from receipts.audit.suite import audit_suite_and_read, dispatch_binds
from receipts.bundle import bundle_bytes
from receipts.records import DispatchRecord
from receipts.records.legacy import SuiteRecordV1, suite_dispatch
from receipts.records.suite import SuiteRecord
from receipts.recordset import RecordSet
from tests.receipts.builders import replace
from tests.receipts.test_suite_receipt import (
    STARTED,
    TRIALS,
    categories,
    entry,
    member_trial,
    raw_zip,
    suite,
    suite_zip,
)

TICKET, OTHER_TICKET = "7" * 64, "8" * 64
SUITE_ID = "d" * 32  # test_suite_receipt.suite()'s id
SUITE_SHA = "e" * 64  # and its suite file digest


def dispatch(member_id: str | None, **changes: Any) -> DispatchRecord:
    fields: dict[str, Any] = {
        "category": "ok",
        "scope": "suite",
        "dispatch_sha256": TICKET,
        "profile": "tiny",
        "task": "polyglot-py-bowling",
        "commit": "b" * 40,
        "tree": "c" * 40,
        "issued_unix_ms": STARTED - 5_000,
        "consumed_unix_ms": STARTED,
        "duration_ms": 1,
        "suite_sha256": SUITE_SHA,
        "suite_id": SUITE_ID,
        "member_id": member_id,
    }
    fields.update(changes)
    return DispatchRecord.model_validate(fields)


def member_receipt(trial_id: str, verdict: str, record: DispatchRecord | None) -> bytes:
    records: RecordSet = member_trial(trial_id, verdict)
    if record is not None:
        assert records.trial is not None
        records = dataclasses.replace(
            records, dispatch=record, trial=replace(records.trial, dispatched=True)
        )
    return bundle_bytes(records)


def dispatched_suite(
    dispatches: tuple[DispatchRecord | None, DispatchRecord | None], ticket: str | None = TICKET
) -> tuple[SuiteRecord, dict[str, bytes]]:
    oracle = member_receipt(TRIALS[0], "accepted", dispatches[0])
    null = member_receipt(TRIALS[1], "task_incomplete", dispatches[1])
    members = (entry("0000", oracle), entry("0001", null, script="null"))
    record = suite(members).model_copy(update={"dispatch_sha256": ticket})
    return record, {"0000": oracle, "0001": null}


def test_a_dispatched_suite_whose_members_name_it_audits_valid() -> None:
    record, blobs = dispatched_suite((dispatch("0000"), dispatch("0001")))
    result, read, _members = audit_suite_and_read(suite_zip(record, blobs))
    assert result.valid, result.findings
    assert read is not None and suite_dispatch(read) == TICKET


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (dispatch("0001", suite_id="f" * 32), "a member of another run of the suite"),
        (dispatch("0001", dispatch_sha256=OTHER_TICKET), "another ticket"),
        (dispatch("0001", suite_sha256="9" * 64), "another suite file"),
        (dispatch("0000"), "another member's slot"),
        (None, "not dispatched at all"),
        (
            dispatch(None, scope="trial", suite_sha256=None, suite_id=None),
            "a trial ticket",
        ),
    ],
)
def test_a_member_that_does_not_name_this_suite_run_is_refused(
    member: DispatchRecord | None, why: str
) -> None:
    """Mutation control: dispatch_binds returning True makes every case here pass the
    audit (they all fail with it in place)."""
    record, blobs = dispatched_suite((dispatch("0000"), member))
    assert categories(suite_zip(record, blobs)) == ["member_dispatch_mismatch"], why


def test_a_member_whose_slot_was_refused_does_not_bind() -> None:
    """A member whose own admission was refused (its slot already used: another trial
    ran as this member) names the suite but is not its member. Checked on the rule
    itself: such a receipt ends at the dispatch stage. Mutation control: without the
    `category == "ok"` term this fails."""
    record, _ = dispatched_suite((dispatch("0000"), dispatch("0001")))
    refused = dispatch("0001", category="already_consumed", consumed_unix_ms=None)
    assert dispatch_binds(record, record.members[1], RecordSet(dispatch=dispatch("0001")))
    assert not dispatch_binds(record, record.members[1], RecordSet(dispatch=refused))


def test_suite_json_cannot_claim_a_dispatch_its_members_do_not_name() -> None:
    record, blobs = dispatched_suite((None, None), ticket=TICKET)
    assert categories(suite_zip(record, blobs)) == ["member_dispatch_mismatch"] * 2


def test_an_undispatched_suite_refuses_members_of_a_dispatched_one() -> None:
    """A member receipt from a dispatched suite run, slipped into an undispatched suite:
    it names a suite run, and not this one."""
    record, blobs = dispatched_suite((dispatch("0000"), None), ticket=None)
    assert categories(suite_zip(record, blobs)) == ["member_dispatch_mismatch"]
    plain, plain_blobs = dispatched_suite((None, None), ticket=None)
    assert categories(suite_zip(plain, plain_blobs)) == []


def test_an_older_suite_record_still_audits() -> None:
    """suite/1 (no dispatch_sha256) from before suite tickets: valid, read as undispatched;
    suite/1 with the /2 field is not a suite/1."""
    record, blobs = dispatched_suite((None, None), ticket=None)
    old = record.to_json()
    del old["dispatch_sha256"]
    old["schema"] = "harness.receipt.suite/1"
    result, read, _ = audit_suite_and_read(raw_zip(old, blobs))
    assert result.valid, result.findings
    assert isinstance(read, SuiteRecordV1) and suite_dispatch(read) is None
    old["dispatch_sha256"] = None
    assert categories(raw_zip(old, blobs)) == ["suite_record_invalid"]


def test_require_current_refuses_an_older_suite_record() -> None:
    record, blobs = dispatched_suite((None, None), ticket=None)
    assert audit_suite_and_read(suite_zip(record, blobs), require_current=True)[0].valid
    old = record.to_json()
    del old["dispatch_sha256"]
    old["schema"] = "harness.receipt.suite/1"
    result, _, _ = audit_suite_and_read(raw_zip(old, blobs), require_current=True)
    assert [f.category for f in result.findings] == ["legacy_format"]
