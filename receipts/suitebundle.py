"""The suite receipt ZIP: `suite.json` and every member's receipt, stored whole.

The same deterministic container as a trial receipt (receipts/bundle.py: sorted names,
fixed timestamps and modes, STORED entries, no directories), so the same members and
record give the same bytes anywhere. Member receipts are entries
`members/<member_id>.zip`, byte for byte the ZIPs the trials wrote: a reviewer can take
one out and `harness audit` it alone. The suite receipt id is the SHA-256 of the
canonical `suite.json` (which names every member's ZIP SHA-256).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from receipts.bundle import RecordTooLarge, zip_bytes
from receipts.records.suite import SUITE_CEILING_BYTES, SuiteRecord
from receipts.staging import staged_file

SUITE_RECORD_NAME = "suite.json"
MEMBER_PREFIX = "members/"


def member_entry(member_id: str) -> str:
    return f"{MEMBER_PREFIX}{member_id}.zip"


@dataclass(frozen=True)
class WrittenSuite:
    suite_receipt_id: str
    zip_sha256: str
    size_bytes: int


class MemberMismatch(ValueError):
    """The member ZIPs given are not exactly the members the record says have one."""


def suite_entries(record: SuiteRecord, member_zips: Mapping[str, bytes]) -> dict[str, bytes]:
    present = {m.member_id: m for m in record.members if m.zip_sha256 is not None}
    if set(member_zips) != set(present):
        raise MemberMismatch("member receipts")
    for member_id, data in member_zips.items():
        if hashlib.sha256(data).hexdigest() != present[member_id].zip_sha256:
            raise MemberMismatch(member_id)
    data = record.canonical_bytes()
    if len(data) > SUITE_CEILING_BYTES:
        raise RecordTooLarge(SUITE_RECORD_NAME)
    entries = {member_entry(member_id): blob for member_id, blob in member_zips.items()}
    entries[SUITE_RECORD_NAME] = data
    return entries


def write_suite_bundle(
    record: SuiteRecord, member_zips: Mapping[str, bytes], target: Path
) -> WrittenSuite:
    """Write the suite receipt to `target`, staged then linked into place; never overwrites."""
    entries = suite_entries(record, member_zips)
    data = zip_bytes(entries)
    with staged_file(target) as staged:
        staged.write_bytes(data)
    return WrittenSuite(
        suite_receipt_id=hashlib.sha256(entries[SUITE_RECORD_NAME]).hexdigest(),
        zip_sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
    )
