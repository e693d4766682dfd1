"""Sign a receipt the harness wrote, as read back and audited (never from memory).

`harness trial` and `harness suite run` sign with `--sign-key` (default
`$HARNESS_SIGN_KEY`); the envelope goes beside the ZIP (RECEIPT.zip.dsse.json), written
whole and renamed into place, so a reader sees none or all of it. Only a receipt that
audits valid is signed: a signature vouches for what the audit can read.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from securesystemslib.signer import CryptoSigner

from receipts.audit import audit_and_read
from receipts.audit.suite import audit_suite_and_read, read_suite_file
from receipts.signing import (
    envelope_path,
    member_subjects,
    predicate_of,
    sign,
    suite_predicate_of,
)

SIGN_KEY_ENV = "HARNESS_SIGN_KEY"
"""The default for --sign-key: in CI, the path of the file its secret key is written to."""


def add_sign_key_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--sign-key",
        type=Path,
        default=os.environ.get(SIGN_KEY_ENV) or None,
        metavar="KEY",
        help=f"sign {what} with this Ed25519 key (harness keygen; default ${SIGN_KEY_ENV}):"
        " a DSSE envelope beside the ZIP, NAME.zip.dsse.json",
    )


def _place(receipt: Path, envelope: bytes) -> Path:
    path = envelope_path(receipt)
    staging = path.with_name(f".{path.name}.partial")
    staging.write_bytes(envelope)
    staging.replace(path)
    return path


def sign_trial_receipt(receipt: Path, signer: CryptoSigner) -> Path:
    data = receipt.read_bytes()
    result, records = audit_and_read(data)
    assert records is not None and result.receipt_id is not None, "signing a valid receipt"
    return _place(
        receipt, sign(receipt.name, data, predicate_of(records, result.receipt_id), signer)
    )


def sign_suite_receipt(receipt: Path, signer: CryptoSigner) -> Path:
    data = read_suite_file(receipt)
    result, record, _members = audit_suite_and_read(data)
    assert record is not None and result.suite_receipt_id is not None, "signing a valid suite"
    predicate = suite_predicate_of(record, result.suite_receipt_id)
    envelope = sign(receipt.name, data, predicate, signer, member_subjects(record))
    return _place(receipt, envelope)
