"""`harness view RECEIPT.zip [-o report.html]`: a static page of the receipt."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.report.page import render
from harness.suite.page import render_suite
from harness.suite.report import suite_report
from receipts.audit import audit_and_read
from receipts.audit.container import MAX_ZIP_BYTES
from receipts.audit.suite import audit_suite_and_read, is_suite_receipt, read_suite_file


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("view", help="render a receipt as a static HTML page")
    parser.add_argument(
        "receipt", type=Path, metavar="RECEIPT.zip", help="the receipt to render (audited first)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), help="the HTML file to write"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if is_suite_receipt(args.receipt):
        return _suite(args)
    try:
        with args.receipt.open("rb") as handle:
            data = handle.read(MAX_ZIP_BYTES + 1)
    except OSError as exc:
        print(f"harness view: cannot read the receipt ({type(exc).__name__})", file=sys.stderr)
        return 2
    result, records = audit_and_read(data)
    args.output.write_text(render(result, records), encoding="utf-8")
    print(args.output)
    return 0 if result.valid else 1


def _suite(args: argparse.Namespace) -> int:
    """A suite receipt: its audit, and when valid its report's figures and plot."""
    try:
        data = read_suite_file(args.receipt)
    except OSError as exc:
        print(f"harness view: cannot read the receipt ({type(exc).__name__})", file=sys.stderr)
        return 2
    result, record, members = audit_suite_and_read(data)
    report = suite_report(record, members) if record is not None else None
    args.output.write_text(render_suite(result, report), encoding="utf-8")
    print(args.output)
    return 0 if result.valid else 1
