"""The suite receipt: deterministic, and every way of bending it is caught.

Members are real trial receipts written by the bundle writer from complete record sets
(builders.py), one accepted and one task_incomplete; each tampering below changes one
thing the way someone wanting a better pass rate would, and the suite must not audit."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pydantic
import pytest

from receipts import suitebundle
from receipts.audit import audit_bytes
from receipts.audit.suite import audit_suite_and_read, audit_suite_bytes, is_suite_receipt
from receipts.bundle import RecordTooLarge, bundle_bytes, zip_bytes
from receipts.canonical import canonical
from receipts.records import FacetComparison
from receipts.records.suite import SuiteMember, SuiteRecord, aggregate
from receipts.recordset import RecordSet
from receipts.suitebundle import MemberMismatch, suite_entries, write_suite_bundle
from tests.receipts.builders import accepted_scripted_trial, hoststate, replace

TRIALS = ("a" * 32, "b" * 32, "c" * 32)


STARTED, ENDED = 1_790_000_000_000, 1_790_000_060_000
"""The builders' trial window; the suite's window holds it."""


def member_trial(trial_id: str, verdict: str, shift_ms: int = 0) -> RecordSet:
    records = accepted_scripted_trial()
    assert records.trial is not None and records.verification is not None
    trial = replace(
        records.trial,
        trial_id=trial_id,
        task="polyglot-py-bowling",
        started_unix_ms=STARTED + shift_ms,
        ended_unix_ms=ENDED + shift_ms,
    )
    changes: dict[str, Any] = {"trial": trial}
    if verdict == "cancelled":  # SIGTERM while the agent ran: what the pipeline writes
        changes.update(
            agent=None, verification=None, verifier_vm=None, agent_turns=(), tool_calls=()
        )
        changes["trial"] = replace(
            trial,
            failed_stage="agent",
            cancelled_stage="agent",
            cancel_signal="SIGTERM",
            verdict="cancelled",
        )
    if verdict == "failed_host_state":
        changed = FacetComparison(
            before_sha256="1" * 64,
            after_sha256="2" * 64,
            result="changed",
            raw_bytes="differ",
            excluded_before=0,
            excluded_after=0,
            unrelated_before=0,
            unrelated_after=0,
        )
        changes["hoststate"] = hoststate(listening_sockets=changed)
        changes["trial"] = replace(trial, verdict="failed_host_state")
    if verdict == "task_incomplete":
        changes["verification"] = replace(
            records.verification, result="failed", tests_passed=2, tests_failed=1
        )
        changes["trial"] = replace(changes["trial"], verdict="task_incomplete")
    if verdict == "accepted_unguarded":  # a pass judged in the solution's own process
        changes["verification"] = replace(records.verification, judge="in_process")
        changes["trial"] = replace(changes["trial"], verdict="accepted_unguarded")
    records = dataclasses.replace(records, **changes)
    return records


def receipt(trial_id: str, verdict: str, shift_ms: int = 0) -> bytes:
    data = bundle_bytes(member_trial(trial_id, verdict, shift_ms))
    result = audit_bytes(data)
    assert result.valid and result.derived_verdict == verdict, result.findings
    return data


def entry(member_id: str, data: bytes | None, script: str = "oracle", **extra: Any) -> SuiteMember:
    fields: dict[str, Any] = {
        "member_id": member_id,
        "task": "polyglot-py-bowling",
        "language": "python",
        "profile": "tiny",
        "policy": "scripted",
        "script": script,
        "repeat": 0,
        "state": "finished",
        "exit_code": 0,
        "trial_id": None,
        "receipt_id": None,
        "zip_sha256": None,
        "verdict": None,
        "missing": None,
    }
    if data is not None:
        result = audit_bytes(data)
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            trial_json = zf.read("trial.json")
        fields.update(
            trial_id=json.loads(trial_json)["trial_id"],
            receipt_id=result.receipt_id,
            zip_sha256=result.zip_sha256,
            verdict=result.derived_verdict,
        )
    fields.update(extra)
    return SuiteMember.model_validate(fields)


def suite(members: tuple[SuiteMember, ...]) -> SuiteRecord:
    source = accepted_scripted_trial().source
    assert source is not None
    verdicts, missing = aggregate(members)
    return SuiteRecord(
        suite_id="d" * 32,
        name="polyglot-python-smoke",
        suite_sha256="e" * 64,
        source=source,
        harness_version="0.1.0",
        executor="local",
        started_unix_ms=STARTED - 1_000,
        ended_unix_ms=ENDED + 1_000,
        max_concurrency=2,
        members=members,
        verdicts=verdicts,
        missing=missing,
        dispatch_sha256=None,
    )


@pytest.fixture(scope="module")
def parts() -> tuple[SuiteRecord, dict[str, bytes]]:
    oracle, null = receipt(TRIALS[0], "accepted"), receipt(TRIALS[1], "task_incomplete")
    members = (
        entry("0000", oracle),
        entry("0001", null, script="null"),
        entry("0002", None, state="cancelled", exit_code=None, missing="cancelled_before_start"),
    )
    return suite(members), {"0000": oracle, "0001": null}


def suite_zip(record: SuiteRecord, blobs: dict[str, bytes]) -> bytes:
    return zip_bytes(suite_entries(record, blobs))


def raw_zip(record_json: dict[str, Any], blobs: dict[str, bytes]) -> bytes:
    """A suite ZIP laid out by the writer's container but with a suite.json the record
    model would refuse to build (the tamperer does not use our models)."""
    entries = {f"members/{k}.zip": v for k, v in blobs.items()}
    entries["suite.json"] = canonical(record_json)
    return zip_bytes(entries)


def categories(data: bytes) -> list[str]:
    return [f.category for f in audit_suite_bytes(data).findings]


def test_a_suite_receipt_audits_and_reads_back(parts, tmp_path) -> None:  # type: ignore[no-untyped-def]
    record, blobs = parts
    written = write_suite_bundle(record, blobs, tmp_path / "suite.zip")
    data = (tmp_path / "suite.zip").read_bytes()
    assert data == suite_zip(record, blobs), "deterministic"
    result, read, members = audit_suite_and_read(data)
    assert result.valid, result.findings
    assert result.suite_receipt_id == written.suite_receipt_id
    assert result.zip_sha256 == written.zip_sha256 == hashlib.sha256(data).hexdigest()
    assert (result.members, result.members_with_receipt, result.members_valid) == (3, 2, 2)
    assert read == record and set(members) == {"0000", "0001"}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.read("members/0000.zip") == blobs["0000"], "stored whole: audits alone"
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_the_writer_refuses_members_that_do_not_match(parts) -> None:  # type: ignore[no-untyped-def]
    record, blobs = parts
    with pytest.raises(MemberMismatch):
        suite_entries(record, {"0000": blobs["0000"]})
    with pytest.raises(MemberMismatch):
        suite_entries(record, {"0000": blobs["0001"], "0001": blobs["0000"]})


def test_a_member_identity_edited(parts) -> None:  # type: ignore[no-untyped-def]
    """suite.json says the member ran another task (or profile, or policy) than it did."""
    record, blobs = parts
    for field, value in (("task", "polyglot-py-react"), ("profile", "smollm2")):
        data = record.to_json()
        data["members"][0][field] = value
        assert categories(raw_zip(data, blobs)) == ["member_identity_mismatch"], field
    data = record.to_json()
    data["members"][0]["receipt_id"] = "f" * 64
    assert categories(raw_zip(data, blobs)) == ["member_receipt_id_mismatch"]


def test_a_member_swapped_for_another_receipt(parts) -> None:  # type: ignore[no-untyped-def]
    """The null's failing receipt replaced by a passing one."""
    record, blobs = parts
    other = receipt(TRIALS[2], "accepted", shift_ms=-86_400_000)  # yesterday's run
    assert "member_digest_mismatch" in categories(suite_zip_raw(record, {**blobs, "0001": other}))
    # ...and with suite.json's digest, receipt id, trial id and verdict rewritten to match:
    data = record.to_json()
    swapped = entry("0001", other, script="null")
    data["members"][1] = swapped.model_dump(mode="json")
    data["verdicts"] = [{"verdict": "accepted", "count": 2}]
    found = categories(raw_zip(data, {**blobs, "0001": other}))
    assert found == ["member_outside_suite"], "it ran before the suite started"


def suite_zip_raw(record: SuiteRecord, blobs: dict[str, bytes]) -> bytes:
    return raw_zip(record.to_json(), blobs)


def test_a_verdict_edited_in_suite_json(parts) -> None:  # type: ignore[no-untyped-def]
    record, blobs = parts
    data = record.to_json()
    data["members"][1]["verdict"] = "accepted"
    assert categories(raw_zip(data, blobs)) == ["member_verdict_mismatch", "aggregate_mismatch"]
    data["verdicts"] = [{"verdict": "accepted", "count": 2}]
    assert categories(raw_zip(data, blobs)) == ["member_verdict_mismatch"]


def test_a_member_receipt_edited_inside(parts) -> None:  # type: ignore[no-untyped-def]
    """The member's own trial.json claims accepted: its ZIP no longer audits (and the
    suite's digest for it is rewritten to match, as a tamperer would)."""
    record, blobs = parts
    with zipfile.ZipFile(io.BytesIO(blobs["0001"])) as zf:
        entries = {i.filename: zf.read(i) for i in zf.infolist()}
    entries["trial.json"] = entries["trial.json"].replace(b'"task_incomplete"', b'"accepted"')
    forged = zip_bytes(entries)
    data = record.to_json()
    data["members"][1]["zip_sha256"] = hashlib.sha256(forged).hexdigest()
    assert categories(raw_zip(data, {**blobs, "0001": forged})) == ["member_invalid"]


def test_a_member_dropped_or_added(parts) -> None:  # type: ignore[no-untyped-def]
    record, blobs = parts
    assert categories(suite_zip_raw(record, {"0000": blobs["0000"]})) == ["member_receipt_missing"]
    extra = {**blobs, "0002": receipt(TRIALS[2], "accepted")}
    assert categories(suite_zip_raw(record, extra)) == ["member_receipt_unexpected"]
    (finding,) = audit_suite_bytes(suite_zip_raw(record, extra)).findings
    assert finding.member_id == "0002"  # the finding names the member it is about


def test_a_failing_member_turned_into_a_missing_one(parts) -> None:  # type: ignore[no-untyped-def]
    """Hiding a failure as 'cancelled before start' (its receipt dropped) while the
    counts still add up: the receipt is then an unexpected entry; with the receipt also
    dropped, the suite is valid and says plainly the member is missing (not a pass)."""
    record, blobs = parts
    data = record.to_json()
    data["members"][1].update(
        trial_id=None,
        receipt_id=None,
        zip_sha256=None,
        verdict=None,
        state="cancelled",
        exit_code=None,
        missing="cancelled_before_start",
    )
    data["verdicts"] = [{"verdict": "accepted", "count": 1}]
    data["missing"] = [{"reason": "cancelled_before_start", "count": 2}]
    assert categories(raw_zip(data, blobs)) == ["member_receipt_unexpected"]


def test_a_member_recorded_as_invalid_makes_the_suite_invalid(parts) -> None:  # type: ignore[no-untyped-def]
    record, blobs = parts
    data = record.to_json()
    data["members"][2].update(missing="receipt_invalid", state="finished", exit_code=4)
    data["missing"] = [{"reason": "receipt_invalid", "count": 1}]
    assert categories(raw_zip(data, blobs)) == ["member_invalid"]


def test_the_container_must_be_the_writers(parts) -> None:  # type: ignore[no-untyped-def]
    record, blobs = parts
    good = suite_zip(record, blobs)
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf,
        zipfile.ZipFile(io.BytesIO(good)) as src,
    ):
        for info in src.infolist():
            zf.writestr(info.filename, src.read(info))  # today's timestamps
    assert categories(buffer.getvalue()) == ["container_not_canonical"]
    entries = {"suite.json": record.canonical_bytes(), "notes.txt": b"x"}
    entries.update({f"members/{k}.zip": v for k, v in blobs.items()})
    assert "unknown_entry" in categories(zip_bytes(entries))
    assert categories(b"not a zip") == ["zip_malformed"]
    pretty = {f"members/{k}.zip": v for k, v in blobs.items()}
    pretty["suite.json"] = b" " + record.canonical_bytes()
    assert categories(zip_bytes(pretty)) == ["suite_record_not_canonical"]
    data = record.to_json()
    data["members"][0]["note"] = "x"
    assert categories(raw_zip(data, blobs)) == ["suite_record_invalid"]
    assert categories(zip_bytes({f"members/{k}.zip": v for k, v in blobs.items()})) == [
        "suite_record_missing"
    ]


def test_a_member_at_the_edges_of_the_window_is_inside(parts) -> None:  # type: ignore[no-untyped-def]
    """The window is closed: members that started when the suite started and ended when
    it ended ran inside it; one millisecond less on either side and they did not."""
    record, blobs = parts
    exact = record.model_copy(update={"started_unix_ms": STARTED, "ended_unix_ms": ENDED})
    assert audit_suite_bytes(suite_zip(exact, blobs)).valid
    for update in ({"started_unix_ms": STARTED + 1}, {"ended_unix_ms": ENDED - 1}):
        short = exact.model_copy(update=update)
        assert set(categories(suite_zip(short, blobs))) == {"member_outside_suite"}, update


def test_not_a_zip_is_no_suite(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = audit_suite_bytes(b"not a zip at all")
    assert (result.valid, result.members, result.members_with_receipt) == (False, 0, 0)
    assert [f.category for f in result.findings] == ["zip_malformed"]
    path = tmp_path / "x.zip"
    path.write_bytes(b"not a zip at all")
    assert not is_suite_receipt(path)


def test_every_member_is_checked_after_one_fails(parts) -> None:  # type: ignore[no-untyped-def]
    """A finding for one member does not stop the audit: each member's own finding is
    named, so a reader sees every member whose evidence is bad."""
    record, blobs = parts

    def named(data: bytes) -> list[tuple[str, str | None]]:
        return [(f.category, f.member_id) for f in audit_suite_bytes(data).findings]

    swapped = {"0000": blobs["0001"], "0001": blobs["0000"]}
    assert named(suite_zip_raw(record, swapped)) == [
        ("member_digest_mismatch", "0000"),
        ("member_digest_mismatch", "0001"),
    ]
    assert named(suite_zip_raw(record, {})) == [
        ("member_receipt_missing", "0000"),
        ("member_receipt_missing", "0001"),
    ]


def test_every_bad_entry_is_named(parts) -> None:  # type: ignore[no-untyped-def]
    """Two unknown entries are two findings, and so are two compressed ones: the first
    does not stop the reading of the container."""
    record, blobs = parts
    good = suite_zip(record, blobs)
    for compress, category in ((zipfile.ZIP_STORED, "unknown_entry"),
                               (zipfile.ZIP_DEFLATED, "compressed_entry")):  # fmt: skip
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(out, "w") as dst:
            names = ("extra-1", "extra-2") if category == "unknown_entry" else ()
            for name in names:
                dst.writestr(name, b"x", compress_type=compress)
            for info in src.infolist():
                data = src.read(info)
                if category == "compressed_entry" and info.filename.startswith("members/"):
                    dst.writestr(info.filename, data, compress_type=compress)
                else:
                    dst.writestr(info, data)
        assert categories(out.getvalue()).count(category) == 2, category


def test_a_member_without_receipt_does_not_end_the_check(parts) -> None:  # type: ignore[no-untyped-def]
    """A member listed first with no receipt (cancelled before it started) is skipped,
    not the end of the audit: the member after it whose receipt was dropped from the
    ZIP is still found missing. Mutation control: the `continue` after a member without
    receipt as `break` leaves the second member unchecked and the suite valid."""
    _, blobs = parts
    members = (
        entry("0000", None, state="cancelled", exit_code=None, missing="cancelled_before_start"),
        entry("0001", blobs["0000"]),
    )
    record = suite(members)
    assert audit_suite_bytes(suite_zip(record, {"0001": blobs["0000"]})).valid
    dropped = audit_suite_bytes(suite_zip_raw(record, {}))
    assert [(f.category, f.member_id) for f in dropped.findings] == [
        ("member_receipt_missing", "0001")
    ]


def test_every_member_that_does_not_audit_is_named(parts) -> None:  # type: ignore[no-untyped-def]
    """Two members whose receipts were edited inside (digests rewritten to match) are two
    `member_invalid` findings, one per member. Mutation control: the `continue` after
    `member_invalid` as `break` names the first only."""
    record, blobs = parts
    data = record.to_json()
    forged: dict[str, bytes] = {}
    for index, member_id in enumerate(("0000", "0001")):
        with zipfile.ZipFile(io.BytesIO(blobs[member_id])) as zf:
            inside = {i.filename: zf.read(i) for i in zf.infolist()}
        inside["trial.json"] = inside["trial.json"].replace(b'"polyglot-py-bowling"', b'"x"')
        forged[member_id] = zip_bytes(inside)
        assert forged[member_id] != blobs[member_id]
        data["members"][index]["zip_sha256"] = hashlib.sha256(forged[member_id]).hexdigest()
    found = [(f.category, f.member_id) for f in audit_suite_bytes(raw_zip(data, forged)).findings]
    assert found == [("member_invalid", "0000"), ("member_invalid", "0001")]


def test_a_suite_may_end_in_the_millisecond_it_started(parts) -> None:  # type: ignore[no-untyped-def]
    """`ended >= started`: a suite whose members all ended at once (or none ran) ends
    in its starting millisecond; one that ends before it starts is refused."""
    record, _ = parts
    same = replace(record, ended_unix_ms=record.started_unix_ms)
    assert same.ended_unix_ms == same.started_unix_ms
    with pytest.raises(pydantic.ValidationError, match="cannot end before it starts"):
        replace(record, ended_unix_ms=record.started_unix_ms - 1)


def test_each_aggregate_is_sorted_and_unique_on_its_own(parts) -> None:  # type: ignore[no-untyped-def]
    """Verdict counts out of order are refused even when the missing counts are in
    order (each list is checked, not only both together)."""
    record, _ = parts
    verdicts = record.verdicts
    assert len(verdicts) == 2 and len(record.missing) == 1
    assert replace(record, verdicts=verdicts).verdicts == verdicts  # the positive control
    with pytest.raises(pydantic.ValidationError, match="sorted and unique"):
        replace(record, verdicts=tuple(reversed(verdicts)))
    with pytest.raises(pydantic.ValidationError, match="sorted and unique"):
        replace(record, verdicts=(verdicts[0], verdicts[0]))


def test_a_suite_record_of_exactly_the_ceiling_is_written(
    parts: tuple[SuiteRecord, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ceiling is inclusive: a suite record of exactly `SUITE_CEILING_BYTES` is
    written, one byte over is refused by name (the ceiling set to this record's size,
    so the boundary is exact without an 8 MiB record)."""

    record, blobs = parts
    size = len(record.canonical_bytes())
    monkeypatch.setattr(suitebundle, "SUITE_CEILING_BYTES", size)
    written = write_suite_bundle(record, blobs, tmp_path / "suite.zip")
    assert written.size_bytes == (tmp_path / "suite.zip").stat().st_size
    with pytest.raises(dataclasses.FrozenInstanceError):
        written.size_bytes = 0  # type: ignore[misc]
    monkeypatch.setattr(suitebundle, "SUITE_CEILING_BYTES", size - 1)
    with pytest.raises(RecordTooLarge):
        suite_entries(record, blobs)
