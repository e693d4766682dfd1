"""The deterministic receipt ZIP.

Same records, same bytes, on any machine: entries sorted by name, fixed 1980-01-01
timestamps, fixed modes, no directory entries, no extra fields, and no compression.
Compression is left out on purpose: DEFLATE output depends on the zlib build (zlib vs
zlib-ng give different bytes for the same input), which would break byte identity across
machines; records are small, and STORED entries also make zip bombs impossible.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from receipts.canonical import canonical
from receipts.manifest import MANIFEST_CEILING_BYTES, Manifest, ManifestEntry, receipt_id
from receipts.records.base import Record
from receipts.recordset import MANIFEST_NAME, RecordSet, classify_entry, record_entries
from receipts.staging import staged_file

FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644  # regular file, rw-r--r--
CREATE_SYSTEM_UNIX = 3
ZIP_VERSION = 20


class RecordTooLarge(ValueError):
    """A record exceeds its ceiling; it is refused, never cut (docs/engineering.md §3)."""


class TrialRecordMissing(ValueError):
    """A receipt without its trial record cannot be written."""


class NotCurrentVersion(ValueError):
    """A record of an older version than its kind's current one (`Kind.legacy`): the audit
    reads those so older receipts stay auditable, but a new receipt never carries one."""


class SequenceOutOfOrder(ValueError):
    """A numbered record whose `index` is not its position: the entry name would lie."""


@dataclass(frozen=True)
class WrittenBundle:
    receipt_id: str
    zip_sha256: str
    size_bytes: int


def zip_info(name: str) -> zipfile.ZipInfo:
    """The one ZipInfo shape every entry has."""
    info = zipfile.ZipInfo(name, date_time=FIXED_DATE_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = CREATE_SYSTEM_UNIX
    info.create_version = ZIP_VERSION
    info.extract_version = ZIP_VERSION
    info.external_attr = FILE_MODE << 16
    return info


def zip_bytes(entries: Mapping[str, bytes]) -> bytes:
    """Lay `entries` out as the deterministic container (no validation of the contents)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED, allowZip64=False) as zf:
        for name in sorted(entries):
            zf.writestr(zip_info(name), entries[name])
    return buffer.getvalue()


def manifest_for(entries: Mapping[str, bytes]) -> Manifest:
    return Manifest(
        entries=tuple(
            ManifestEntry(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())
            for name, data in sorted(entries.items())
        )
    )


def bundle_entries(records: RecordSet) -> dict[str, bytes]:
    """Every entry of the receipt, manifest included, as canonical bytes."""
    if records.trial is None:
        raise TrialRecordMissing("trial")
    entries: dict[str, bytes] = {}
    for name, record in record_entries(records).items():
        found = classify_entry(name)
        if found is not None and type(record) is not found[0].model:
            raise NotCurrentVersion(name)
        if (
            found is not None
            and found[1] is not None
            and getattr(record, "index", None) != found[1]
        ):
            raise SequenceOutOfOrder(name)
        data = record.canonical_bytes()
        if len(data) > Record.CEILING_BYTES:
            raise RecordTooLarge(name)
        entries[name] = data
    manifest = canonical(manifest_for(entries).to_json())
    if len(manifest) > MANIFEST_CEILING_BYTES:
        raise RecordTooLarge(MANIFEST_NAME)
    entries[MANIFEST_NAME] = manifest
    return entries


def bundle_bytes(records: RecordSet) -> bytes:
    return zip_bytes(bundle_entries(records))


def write_bundle(records: RecordSet, target: Path) -> WrittenBundle:
    """Write the receipt ZIP to `target`, staged then linked into place; never overwrites."""
    entries = bundle_entries(records)
    data = zip_bytes(entries)
    with staged_file(target) as staged:
        staged.write_bytes(data)
    return WrittenBundle(
        receipt_id=receipt_id(entries[MANIFEST_NAME]),
        zip_sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
    )
