"""Audit a receipt ZIP: integrity → schemas → cross-record consistency → verdict.

Each phase runs only on what the previous one passed; every failure is a closed
category that names its entry. A receipt is valid when nothing was found; its verdict
is derived from the records by `receipts.verdict`, never read from the trial's claim.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from receipts.audit.consistency import RULES, check_consistency
from receipts.audit.container import CONTAINER_RULES, MAX_ZIP_BYTES, check_container
from receipts.audit.context import AuditContext
from receipts.audit.findings import AuditResult, Finding
from receipts.audit.schemas import SCHEMA_RULES, check_schemas
from receipts.failure import failure_reason
from receipts.manifest import receipt_id
from receipts.recordset import MANIFEST_NAME, RecordSet
from receipts.verdict import derive_verdict

__all__ = [
    "ALL_RULES",
    "AuditResult",
    "Finding",
    "audit_and_read",
    "audit_and_read_file",
    "audit_bytes",
    "audit_file",
]

ALL_RULES: tuple[str, ...] = (*CONTAINER_RULES, *SCHEMA_RULES, *(name for name, _rule in RULES))
"""Every rule the audit applies, in the order it applies them."""


def audit_bytes(
    data: bytes, disabled: frozenset[str] = frozenset(), *, require_current: bool = False
) -> AuditResult:
    return audit_and_read(data, disabled, require_current=require_current)[0]


def audit_and_read(
    data: bytes, disabled: frozenset[str] = frozenset(), *, require_current: bool = False
) -> tuple[AuditResult, RecordSet | None]:
    """The audit result and, when the receipt is valid, its records (for reports).
    `require_current`: a record of an older version than this harness writes is a
    finding (`legacy_format`), for reviewers who accept no legacy format."""
    ctx = AuditContext(data=data, disabled=disabled, require_current=require_current)
    entries = check_container(ctx)
    records = None
    if entries is not None:
        records = check_schemas(ctx, entries)
        if not ctx.findings:
            check_consistency(ctx, records)
    trial = records.trial if records is not None else None
    derivable = records is not None and not ctx.findings
    manifest = entries.get(MANIFEST_NAME) if entries is not None else None
    reason = failure_reason(records) if derivable and records is not None else None
    result = AuditResult(
        valid=not ctx.findings,
        zip_sha256=hashlib.sha256(data).hexdigest(),
        receipt_id=receipt_id(manifest) if manifest is not None and not ctx.findings else None,
        claimed_verdict=trial.verdict if trial is not None else None,
        derived_verdict=derive_verdict(records) if derivable and records is not None else None,
        policy=trial.policy if trial is not None else None,
        placement=trial.placement if trial is not None else None,
        channel=trial.channel if trial is not None else None,
        findings=tuple(ctx.findings),
        findings_truncated=ctx.truncated,
        failed_stage=reason.stage if reason is not None else None,
        failed_category=reason.category if reason is not None else None,
        remedy=reason.remedy if reason is not None else None,
        signature="unsigned",
        signed_by=None,
    )
    return result, records if result.valid else None


def audit_file(path: Path) -> AuditResult:
    """Audit the ZIP at `path`, reading at most one byte past the size ceiling.

    OSError (missing, unreadable, a directory) propagates: the CLI maps it to exit 2.
    """
    return audit_and_read_file(path)[0]


def audit_and_read_file(
    path: Path, *, require_current: bool = False
) -> tuple[AuditResult, RecordSet | None]:
    """`audit_and_read` of the ZIP at `path`, read as `audit_file` reads it."""
    with path.open("rb") as handle:
        return audit_and_read(handle.read(MAX_ZIP_BYTES + 1), require_current=require_current)
