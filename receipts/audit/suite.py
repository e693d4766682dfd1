"""Audit a suite receipt: the container, `suite.json`, every member, then the aggregate.

A suite is valid only when its container is exactly what the writer makes of its
entries, `suite.json` is a canonical closed record, every member the record says has a
receipt has exactly that ZIP (its SHA-256), that ZIP audits as a valid trial receipt on
its own, its receipt id, trial id, task, profile and policy are the ones the record
names, the record's verdict is the verdict the member's records derive, and the trial
ran inside the suite's time window; and the aggregate counts are those of the members.

A dispatched suite (`harness suite run --dispatch`, suite/2 or later with `dispatch_sha256`)
also binds each member to this very suite run: every member's dispatch record must be
a suite dispatch with `ok`, naming this ticket, this suite file's digest, this suite id
and its own member id. A member of an undispatched suite must not carry a suite
dispatch (it belongs to another suite run). What an undispatched suite cannot see: a
receipt of another trial of the same task, profile and policy that ran inside the same
window (a second suite run side by side), swapped in with suite.json rewritten to match;
dispatch the suite when that matters. One member that does not audit makes the whole
suite invalid: a suite's pass rate is only as good as its worst member's evidence.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from receipts.audit import audit_and_read
from receipts.audit.container import MAX_ZIP_BYTES
from receipts.audit.findings import SignatureRefusal, SignatureState
from receipts.bundle import zip_bytes
from receipts.canonical import CanonicalError, parse_canonical
from receipts.records import DispatchRecord
from receipts.records.base import Part, Record
from receipts.records.legacy import AnySuiteRecord, SuiteRecordV1, SuiteRecordV2, suite_dispatch
from receipts.records.suite import (
    SUITE_CEILING_BYTES,
    MemberId,
    SuiteMember,
    SuiteRecord,
    aggregate,
)
from receipts.recordset import RecordSet
from receipts.suitebundle import MEMBER_PREFIX, SUITE_RECORD_NAME, member_entry
from receipts.types import Count, Sha256Hex

MAX_SUITE_BYTES = 4 * 1024 * 1024 * 1024 - 1
"""The ZIP32 limit (the writer uses no ZIP64); docs/suites.md states it."""
_MEMBER_NAME = re.compile(r"^members/([0-9]{4,6})\.zip$")

SuiteAuditCategory = Literal[
    "zip_malformed",
    "zip_oversize",
    "unknown_entry",
    "duplicate_entry",
    "compressed_entry",
    "container_not_canonical",
    "suite_record_missing",
    "suite_record_not_canonical",
    "suite_record_invalid",
    "member_receipt_missing",
    "member_receipt_unexpected",
    "member_digest_mismatch",
    "member_invalid",
    "member_receipt_id_mismatch",
    "member_identity_mismatch",
    "member_verdict_mismatch",
    "member_outside_suite",
    "member_dispatch_mismatch",
    "aggregate_mismatch",
    "legacy_format",
    # the signature, only with a key (receipts/audit/signature.py)
    SignatureRefusal,
]


class SuiteFinding(Part):
    category: SuiteAuditCategory
    member_id: MemberId | None


class SuiteAuditResult(Record):
    schema_: Literal["harness.audit.suite/2"] = Field("harness.audit.suite/2", alias="schema")
    valid: bool
    zip_sha256: Sha256Hex
    suite_receipt_id: Sha256Hex | None
    """SHA-256 of `suite.json`; null when the suite is invalid."""
    members: Count
    members_with_receipt: Count
    members_valid: Count
    findings: Annotated[tuple[SuiteFinding, ...], Field(max_length=20_000)]
    signature: SignatureState
    """As a trial audit's (receipts/audit/findings.py); `/2` added it and `signed_by`."""
    signed_by: Sha256Hex | None


def is_suite_receipt(path: Path) -> bool:
    """Whether the ZIP at `path` is a suite receipt (it has a `suite.json` entry)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return SUITE_RECORD_NAME in zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _entries(data: bytes, findings: list[SuiteFinding]) -> dict[str, bytes] | None:
    def add(category: SuiteAuditCategory) -> None:
        findings.append(SuiteFinding(category=category, member_id=None))

    if len(data) > MAX_SUITE_BYTES:
        add("zip_oversize")
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            names = [info.orig_filename for info in infos]
            if len(names) != len(set(names)):
                add("duplicate_entry")
                return None
            entries: dict[str, bytes] = {}
            for info in infos:
                name = info.orig_filename
                if name != SUITE_RECORD_NAME and not _MEMBER_NAME.fullmatch(name):
                    add("unknown_entry")
                    continue
                if info.compress_type != zipfile.ZIP_STORED:
                    add("compressed_entry")
                    continue
                # Cut at the entry's ceiling: the writer never writes an entry over it
                # (suitebundle refuses a larger suite.json; a member over MAX_ZIP_BYTES
                # is no trial receipt), so a cut entry never rebuilds the container.
                ceiling = SUITE_CEILING_BYTES if name == SUITE_RECORD_NAME else MAX_ZIP_BYTES
                entries[name] = zf.read(info)[:ceiling]
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError):
        add("zip_malformed")
        return None
    if not findings and zip_bytes(entries) != data:
        add("container_not_canonical")
    return entries


def _record(
    entries: dict[str, bytes], findings: list[SuiteFinding], require_current: bool = False
) -> AnySuiteRecord | None:
    raw = entries.get(SUITE_RECORD_NAME)
    if raw is None:
        findings.append(SuiteFinding(category="suite_record_missing", member_id=None))
        return None
    try:
        value = parse_canonical(raw)
    except CanonicalError:
        findings.append(SuiteFinding(category="suite_record_not_canonical", member_id=None))
        return None
    declared = value.get("schema") if isinstance(value, dict) else None
    model = next(
        (m for m in (SuiteRecord, SuiteRecordV2, SuiteRecordV1) if declared == m.schema_id()),
        None,
    )
    if model is None:
        findings.append(SuiteFinding(category="suite_record_invalid", member_id=None))
        return None
    try:
        record = model.model_validate_json(raw)
    except ValidationError:
        findings.append(SuiteFinding(category="suite_record_invalid", member_id=None))
        return None
    if require_current and not isinstance(record, SuiteRecord):
        findings.append(SuiteFinding(category="legacy_format", member_id=None))
    return record


def dispatch_binds(record: AnySuiteRecord, member: SuiteMember, records: RecordSet) -> bool:
    """Whether the member's dispatch record is the one this suite's dispatch requires:
    for a dispatched suite, its ticket, suite file, suite run and member slot; for an
    undispatched one, no suite dispatch at all (a member of another suite run)."""
    dispatch = records.dispatch
    is_suite = isinstance(dispatch, DispatchRecord) and dispatch.scope == "suite"
    ticket = suite_dispatch(record)
    if ticket is None:
        return not is_suite
    return (
        isinstance(dispatch, DispatchRecord)
        and is_suite
        and dispatch.category == "ok"
        and (dispatch.dispatch_sha256, dispatch.suite_sha256, dispatch.suite_id)
        == (ticket, record.suite_sha256, record.suite_id)
        and dispatch.member_id == member.member_id
    )


def audit_suite_and_read(
    data: bytes, *, require_current: bool = False
) -> tuple[SuiteAuditResult, AnySuiteRecord | None, dict[str, RecordSet]]:
    """The result; and for a valid suite its record and each member's records by id.
    `require_current`: an older suite record is `legacy_format`, and each member is
    audited so too (a member with a legacy record is `member_invalid`)."""
    findings: list[SuiteFinding] = []
    entries = _entries(data, findings)
    record = _record(entries, findings, require_current) if entries is not None else None
    members_read: dict[str, RecordSet] = {}
    with_receipt = valid_members = 0
    if entries is not None and record is not None:
        listed = {member_entry(m.member_id) for m in record.members if m.zip_sha256 is not None}
        for name in sorted(set(entries) - listed - {SUITE_RECORD_NAME}):
            match = _MEMBER_NAME.fullmatch(name)
            member_id = match.group(1) if match else None
            findings.append(SuiteFinding(category="member_receipt_unexpected", member_id=member_id))
        for member in record.members:
            if member.missing == "receipt_invalid":  # the suite says so itself
                findings.append(SuiteFinding(category="member_invalid", member_id=member.member_id))
            if member.zip_sha256 is None:
                continue
            with_receipt += 1

            def add(category: SuiteAuditCategory, member_id: str = member.member_id) -> None:
                findings.append(SuiteFinding(category=category, member_id=member_id))

            blob = entries.get(member_entry(member.member_id))
            if blob is None:
                add("member_receipt_missing")
                continue
            if hashlib.sha256(blob).hexdigest() != member.zip_sha256:
                add("member_digest_mismatch")
                continue
            member_result, records = audit_and_read(blob, require_current=require_current)
            if not member_result.valid or records is None or records.trial is None:
                add("member_invalid")
                continue
            valid_members += 1
            trial = records.trial
            if member_result.receipt_id != member.receipt_id:
                add("member_receipt_id_mismatch")
            if (trial.trial_id, trial.task, trial.profile, trial.policy) != (
                member.trial_id,
                member.task,
                member.profile,
                member.policy,
            ):
                add("member_identity_mismatch")
            if member_result.derived_verdict != member.verdict:
                add("member_verdict_mismatch")
            if not (
                record.started_unix_ms <= trial.started_unix_ms
                and trial.ended_unix_ms <= record.ended_unix_ms
            ):
                add("member_outside_suite")  # a receipt of another run, swapped in
            if not dispatch_binds(record, member, records):
                add("member_dispatch_mismatch")
            members_read[member.member_id] = records
        verdicts, missing = aggregate(record.members)
        claimed = tuple((entry.verdict, entry.count) for entry in record.verdicts)
        if tuple((e.verdict, e.count) for e in verdicts) != claimed or missing != record.missing:
            findings.append(SuiteFinding(category="aggregate_mismatch", member_id=None))
    valid = not findings
    result = SuiteAuditResult(
        valid=valid,
        zip_sha256=hashlib.sha256(data).hexdigest(),
        suite_receipt_id=(
            hashlib.sha256(entries[SUITE_RECORD_NAME]).hexdigest()
            if valid and entries is not None
            else None
        ),
        members=len(record.members) if record is not None else 0,
        members_with_receipt=with_receipt,
        members_valid=valid_members,
        findings=tuple(findings[:20_000]),
        signature="unsigned",
        signed_by=None,
    )
    if not valid:
        return result, None, {}
    return result, record, members_read


def audit_suite_bytes(data: bytes, *, require_current: bool = False) -> SuiteAuditResult:
    return audit_suite_and_read(data, require_current=require_current)[0]


def read_suite_file(path: Path) -> bytes:
    """The file, or its first `MAX_SUITE_BYTES + 1` bytes: enough to see that a larger
    file is over the bound without reading all of it."""
    with path.open("rb") as handle:
        return handle.read(MAX_SUITE_BYTES + 1)


__all__ = [
    "MEMBER_PREFIX",
    "SuiteAuditResult",
    "SuiteFinding",
    "audit_suite_and_read",
    "audit_suite_bytes",
    "is_suite_receipt",
    "read_suite_file",
]
