"""`harness audit RECEIPT.zip [--key PUB [--signature FILE]] [--require-current] [--json]`:
exit 0 valid, 1 invalid, 2 usage or an unreadable file or key.

Without `--key` nothing says who wrote the receipt and the audit says so (`unsigned`).
With it, the DSSE envelope beside the ZIP (RECEIPT.zip.dsse.json, or `--signature`)
must hold that key's signature over a Statement about exactly these bytes whose
predicate the records bear out (receipts/signing.py); anything else is a finding."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import structlog

from harness.remedies import describe
from receipts.audit import AuditResult, audit_and_read_file
from receipts.audit.signature import audit_signed_file, audit_suite_signed_file
from receipts.audit.suite import (
    SuiteAuditResult,
    audit_suite_bytes,
    is_suite_receipt,
    read_suite_file,
)
from receipts.canonical import canonical
from receipts.failure import FailureReason
from receipts.recordset import RecordSet
from receipts.signing import KeyRefused, envelope_path, read_public_key

EXIT_VALID, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("audit", help="audit a receipt ZIP")
    parser.add_argument("receipt", type=Path, metavar="RECEIPT.zip", help="the receipt to audit")
    parser.add_argument("--json", action="store_true", help="print the closed audit result")
    parser.add_argument(
        "--key", type=Path, metavar="PUB", help="the signer's public key (harness keygen)"
    )
    parser.add_argument(
        "--require-current",
        action="store_true",
        help="refuse records of an older version than this harness writes (legacy formats)",
    )
    parser.add_argument(
        "--signature",
        type=Path,
        metavar="FILE",
        help="the DSSE envelope; default: RECEIPT.zip.dsse.json beside the receipt",
    )
    parser.set_defaults(run=run)


SIGNATURE_LINES = {
    "unsigned": "unsigned (no --key: nothing here says who wrote this receipt)",
    "signed": "signed by ",
    "refused": "refused (see the signature finding) ",
}


def render_human(result: AuditResult, records: RecordSet | None = None) -> str:
    """The audit result for a person; for a valid receipt of a failed stage, that stage,
    its category and (when an operator can fix it) the command that does."""
    lines = [
        f"zip sha256   {result.zip_sha256}",
        f"receipt id   {result.receipt_id or '-'}",
        f"valid        {'yes' if result.valid else 'no'}",
        f"verdict      {result.derived_verdict or '- (not derived: the receipt is invalid)'}",
        f"claimed      {result.claimed_verdict or '-'}",
        f"policy       {result.policy or '-'}",
        f"placement    {result.placement or '-'} (channel {result.channel or '-'})",
        f"signature    {SIGNATURE_LINES[result.signature]}{result.signed_by or ''}",
    ]
    if result.failed_stage is not None and result.failed_category is not None:
        reason = FailureReason(result.failed_stage, result.failed_category, result.remedy)
        profile = records.trial.profile if records is not None and records.trial else "NAME"
        lines += [f"{label:<12} {text}" for label, text in describe(reason, profile)]
    if result.findings:
        lines.append("")
        lines.append(f"{'phase':<12} {'rule':<22} {'category':<28} entry")
        for finding in result.findings:
            entry = finding.entry or (
                f"#{finding.entry_index}" if finding.entry_index is not None else "-"
            )
            lines.append(f"{finding.phase:<12} {finding.rule:<22} {finding.category:<28} {entry}")
        if result.findings_truncated:
            lines.append("(more findings were not listed)")
    return "\n".join(lines)


def render_suite_human(result: SuiteAuditResult) -> str:
    lines = [
        f"zip sha256   {result.zip_sha256}",
        f"suite id     {result.suite_receipt_id or '-'}",
        f"valid        {'yes' if result.valid else 'no'}",
        f"members      {result.members} ({result.members_with_receipt} with a receipt,"
        f" {result.members_valid} audit valid)",
        f"signature    {SIGNATURE_LINES[result.signature]}{result.signed_by or ''}",
    ]
    if result.findings:
        lines.append("")
        lines.append(f"{'category':<30} member")
        lines += [f"{f.category:<30} {f.member_id or '-'}" for f in result.findings]
    return "\n".join(lines)


def _run_suite(args: argparse.Namespace) -> int:
    """A suite receipt: every member audited, then the aggregate (receipts/audit/suite.py)."""
    try:
        current = args.require_current
        if args.key is None:
            result = audit_suite_bytes(read_suite_file(args.receipt), require_current=current)
        else:
            key = read_public_key(args.key)
            envelope = args.signature or envelope_path(args.receipt)
            result = audit_suite_signed_file(args.receipt, envelope, key, require_current=current)[
                0
            ]
    except KeyRefused as exc:
        print(f"harness audit: the key is refused: {exc.category}", file=sys.stderr)
        return EXIT_UNREADABLE
    except OSError as exc:
        print(f"harness audit: cannot read the receipt ({type(exc).__name__})", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.json:
        sys.stdout.write(canonical(result.to_json()).decode("utf-8") + "\n")
    else:
        print(render_suite_human(result))
    return EXIT_VALID if result.valid else EXIT_INVALID


def run(args: argparse.Namespace) -> int:
    log = structlog.get_logger()
    if args.signature is not None and args.key is None:
        print("harness audit: --signature needs --key", file=sys.stderr)
        return EXIT_UNREADABLE
    if is_suite_receipt(args.receipt):
        return _run_suite(args)
    try:
        current = args.require_current
        if args.key is None:
            result, records = audit_and_read_file(args.receipt, require_current=current)
        else:
            key = read_public_key(args.key)
            envelope = args.signature or envelope_path(args.receipt)
            result, records = audit_signed_file(
                args.receipt, envelope, key, require_current=current
            )
    except KeyRefused as exc:
        print(f"harness audit: the key is refused: {exc.category}", file=sys.stderr)
        return EXIT_UNREADABLE
    except OSError as exc:
        print(f"harness audit: cannot read the receipt ({type(exc).__name__})", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.json:
        sys.stdout.write(canonical(result.to_json()).decode("utf-8") + "\n")
    else:
        print(render_human(result, records))
    log.info("audit.done", valid=result.valid, findings=len(result.findings))
    return EXIT_VALID if result.valid else EXIT_INVALID
