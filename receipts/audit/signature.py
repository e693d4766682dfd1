"""The audit with a key: the receipt's own phases, then whether the key vouches for it.

Kept out of `receipts.audit` itself, which guest code may import: this module needs
securesystemslib (receipts/signing.py), which only the host has.

A refused signature makes the receipt invalid like any other finding (phase `signature`)
and, like any invalid receipt, it then has no derived verdict or receipt id: with a key,
a reviewer asked "did this key's holder write exactly this", and the answer is no.
"""

from __future__ import annotations

from pathlib import Path

from securesystemslib.signer import SSlibKey

from receipts.audit import audit_and_read
from receipts.audit.container import MAX_ZIP_BYTES
from receipts.audit.findings import MAX_FINDINGS, AuditResult, Finding
from receipts.audit.suite import (
    SuiteAuditResult,
    SuiteFinding,
    audit_suite_and_read,
    read_suite_file,
)
from receipts.canonical import canonical
from receipts.records.legacy import AnySuiteRecord
from receipts.recordset import RecordSet
from receipts.signing import (
    MAX_ENVELOPE_BYTES,
    check_signature,
    member_subjects,
    predicate_of,
    suite_predicate_of,
)


def audit_signed(
    data: bytes,
    envelope: bytes | None,
    key: SSlibKey,
    disabled: frozenset[str] = frozenset(),
    *,
    require_current: bool = False,
) -> tuple[AuditResult, RecordSet | None]:
    """`audit_and_read`, then the envelope checked against `key` (None: there is none)."""
    result, records = audit_and_read(data, disabled, require_current=require_current)
    expected = None
    if records is not None and result.receipt_id is not None:
        expected = predicate_of(records, result.receipt_id)
    check = check_signature(envelope, data, key, expected)
    if check.refusal is None:
        signed = result.model_copy(update={"signature": "signed", "signed_by": check.signed_by})
        return signed, records
    finding = Finding(
        phase="signature",
        rule="signature",
        category=check.refusal,
        entry=None,
        entry_index=None,
    )
    refused = result.model_copy(
        update={
            "valid": False,
            "findings": (finding, *result.findings[: MAX_FINDINGS - 1]),
            "findings_truncated": result.findings_truncated or len(result.findings) >= MAX_FINDINGS,
            "receipt_id": None,
            "derived_verdict": None,
            "failed_stage": None,
            "failed_category": None,
            "remedy": None,
            "signature": "refused",
            "signed_by": check.signed_by,
        }
    )
    return AuditResult.model_validate_json(canonical(refused.to_json())), None  # re-checked


def audit_suite_signed(
    data: bytes, envelope: bytes | None, key: SSlibKey, *, require_current: bool = False
) -> tuple[SuiteAuditResult, AnySuiteRecord | None]:
    """`audit_suite_and_read`, then the suite's envelope against `key`: its subjects are
    the suite ZIP and every member ZIP the suite record names, in order."""
    result, record, _members = audit_suite_and_read(data, require_current=require_current)
    expected = None
    members: tuple[tuple[str, str], ...] = ()
    if record is not None and result.suite_receipt_id is not None:
        expected = suite_predicate_of(record, result.suite_receipt_id)
        members = member_subjects(record)
    check = check_signature(envelope, data, key, expected, suite=True, members=members)
    if check.refusal is None:
        signed = {"signature": "signed", "signed_by": check.signed_by}
        return result.model_copy(update=signed), record
    finding = SuiteFinding(category=check.refusal, member_id=None)
    refused = result.model_copy(
        update={
            "valid": False,
            "suite_receipt_id": None,
            "findings": (finding, *result.findings[: 20_000 - 1]),
            "signature": "refused",
            "signed_by": check.signed_by,
        }
    )
    return SuiteAuditResult.model_validate_json(canonical(refused.to_json())), None


def read_envelope(path: Path) -> bytes | None:
    """The envelope's bytes, at most one byte past its ceiling; None when there is no
    file there (a missing signature is a finding, not a usage error)."""
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_ENVELOPE_BYTES + 1)
    except FileNotFoundError:
        return None


def audit_signed_file(
    receipt: Path, envelope: Path, key: SSlibKey, *, require_current: bool = False
) -> tuple[AuditResult, RecordSet | None]:
    with receipt.open("rb") as handle:
        data = handle.read(MAX_ZIP_BYTES + 1)
    return audit_signed(data, read_envelope(envelope), key, require_current=require_current)


def audit_suite_signed_file(
    receipt: Path, envelope: Path, key: SSlibKey, *, require_current: bool = False
) -> tuple[SuiteAuditResult, AnySuiteRecord | None]:
    data = read_suite_file(receipt)
    return audit_suite_signed(data, read_envelope(envelope), key, require_current=require_current)
