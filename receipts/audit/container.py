"""Integrity of the ZIP container and of each entry's bytes.

The receipt format is so narrow that a valid receipt is byte-identical to what our
writer makes of its entries; the specific checks come first so that each kind of
tampering gets its own category, and `container_canonical` catches whatever is left
(timestamps, extra fields, comments, ordering, prepended bytes).
"""

from __future__ import annotations

import hashlib
import io
import stat
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable

from pydantic import ValidationError

from receipts.audit.context import AuditContext
from receipts.audit.findings import AuditCategory
from receipts.bundle import FILE_MODE, zip_bytes
from receipts.canonical import CanonicalError, parse_canonical
from receipts.manifest import MANIFEST_CEILING_BYTES, MAX_ENTRIES, Manifest
from receipts.records.base import Record
from receipts.recordset import KINDS, MANIFEST_NAME, classify_entry

MAX_ZIP_BYTES = 256 * 1024 * 1024
MAX_NAME_LENGTH = 128
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_MAGIC = b"PK\x03\x04"
_FLAG_ENCRYPTED = 0x1
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    ValueError,
    struct.error,
    EOFError,
    OSError,
    NotImplementedError,
    OverflowError,
    KeyError,
    IndexError,
)

EntryCheck = Callable[[AuditContext, zipfile.ZipInfo], AuditCategory | None]


def _open(ctx: AuditContext) -> list[zipfile.ZipInfo] | None:
    """The central directory, or None (with a finding) when there is no readable one."""
    if len(ctx.data) > MAX_ZIP_BYTES and ctx.enabled("zip_size"):
        ctx.add("integrity", "zip_size", "zip_oversize")
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(ctx.data)) as zf:
            return zf.infolist()
    except _ZIP_ERRORS:
        if ctx.enabled("zip_structure"):
            truncated = ctx.data.startswith(_LOCAL_MAGIC)
            category: AuditCategory = "zip_truncated" if truncated else "zip_malformed"
            ctx.add("integrity", "zip_structure", category)
        return None


def _name(info: zipfile.ZipInfo) -> AuditCategory | None:
    raw = info.orig_filename
    if raw.endswith("/"):
        return "directory_entry"
    parts = raw.split("/")
    unsafe = (
        not raw
        or len(raw) > MAX_NAME_LENGTH
        or not raw.isascii()
        or not raw.isprintable()
        or raw.startswith("/")
        or "\\" in raw
        or ":" in raw
        or any(part in ("", ".", "..") for part in parts)
    )
    return "unsafe_entry_name" if unsafe else None


def _type(info: zipfile.ZipInfo) -> AuditCategory | None:
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "symlink_entry"
    if stat.S_IFMT(mode) != stat.S_IFMT(FILE_MODE):
        return "special_entry"
    return None


def _flags(info: zipfile.ZipInfo) -> AuditCategory | None:
    return "encrypted_entry" if info.flag_bits & _FLAG_ENCRYPTED else None


def _compression(info: zipfile.ZipInfo) -> AuditCategory | None:
    return "compressed_entry" if info.compress_type != zipfile.ZIP_STORED else None


def _size(info: zipfile.ZipInfo) -> AuditCategory | None:
    ceiling = (
        MANIFEST_CEILING_BYTES if info.orig_filename == MANIFEST_NAME else Record.CEILING_BYTES
    )
    if info.file_size > ceiling:
        return "entry_oversize"
    if info.compress_size != info.file_size:
        return "entry_size_inconsistent"
    return None


def _local_header(data: bytes, info: zipfile.ZipInfo) -> tuple[int, ...] | None:
    start = info.header_offset
    if start < 0 or start + _LOCAL_HEADER.size > len(data):
        return None
    fields = _LOCAL_HEADER.unpack_from(data, start)
    if fields[0] != _LOCAL_MAGIC:
        return None
    return tuple(fields[1:])


def _payload(data: bytes, info: zipfile.ZipInfo) -> bytes | None:
    header = _local_header(data, info)
    if header is None:
        return None
    name_length, extra_length = header[-2], header[-1]
    begin = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
    end = begin + info.compress_size
    return data[begin:end] if end <= len(data) else None


def _local_matches(ctx: AuditContext, info: zipfile.ZipInfo) -> AuditCategory | None:
    header = _local_header(ctx.data, info)
    if header is None:
        return "local_header_mismatch"
    _v, _s, flags, method, _t, _d, crc, csize, size, name_length, extra_length = header
    start = info.header_offset + _LOCAL_HEADER.size
    local_name = ctx.data[start : start + name_length]
    same = (
        local_name == info.orig_filename.encode("ascii", errors="replace")
        and (flags, method, crc, csize, size)
        == (info.flag_bits, info.compress_type, info.CRC, info.compress_size, info.file_size)
        and extra_length == 0
    )
    return None if same else "local_header_mismatch"


def _crc(ctx: AuditContext, info: zipfile.ZipInfo) -> AuditCategory | None:
    payload = _payload(ctx.data, info)
    if payload is None:
        return "local_header_mismatch"
    return "crc_mismatch" if zlib.crc32(payload) != info.CRC else None


def _unary(check: Callable[[zipfile.ZipInfo], AuditCategory | None]) -> EntryCheck:
    return lambda _ctx, info: check(info)


ENTRY_CHECKS: tuple[tuple[str, EntryCheck], ...] = (
    ("entry_name", _unary(_name)),
    ("entry_type", _unary(_type)),
    ("entry_flags", _unary(_flags)),
    ("entry_compression", _unary(_compression)),
    ("entry_size", _unary(_size)),
    ("local_header", _local_matches),
    ("entry_crc", _crc),
)


def _usable_entries(ctx: AuditContext, infos: list[zipfile.ZipInfo]) -> dict[str, bytes]:
    """Entries that pass every per-entry check, by name; each failure is one finding."""
    counts = Counter(info.orig_filename for info in infos)
    duplicated = {name for name, count in counts.items() if count > 1}
    usable: dict[str, bytes] = {}
    for position, info in enumerate(infos):
        name = info.orig_filename
        if name in duplicated:
            if ctx.enabled("duplicate_name"):
                ctx.add("integrity", "duplicate_name", "duplicate_entry", name, position)
                continue
            if name in usable:
                continue
        failed = False
        for rule, check in ENTRY_CHECKS:
            if not ctx.enabled(rule):
                continue
            category = check(ctx, info)
            if category is not None:
                ctx.add("integrity", rule, category, name, position)
                failed = True
                break
        if failed:
            continue
        payload = _payload(ctx.data, info)
        if payload is None:
            continue  # unreadable even with its checks disabled: nothing to use
        unknown = name != MANIFEST_NAME and classify_entry(name) is None
        if unknown and ctx.enabled("known_entry"):
            ctx.add("integrity", "known_entry", "unknown_entry", name, position)
            continue
        usable[name] = payload
    return usable


def _parse_manifest(ctx: AuditContext, entries: dict[str, bytes]) -> Manifest | None:
    raw = entries.get(MANIFEST_NAME)
    if raw is None:
        if ctx.enabled("manifest_present"):
            ctx.add("integrity", "manifest_present", "manifest_missing", MANIFEST_NAME)
        return None
    try:
        return Manifest.model_validate_json(raw)
    except ValidationError:
        if ctx.enabled("manifest_valid"):
            ctx.add("integrity", "manifest_valid", "manifest_invalid", MANIFEST_NAME)
        return None


def _check_manifest(ctx: AuditContext, entries: dict[str, bytes], all_names: set[str]) -> None:
    manifest = _parse_manifest(ctx, entries)
    if manifest is None:
        return
    listed = {entry.name for entry in manifest.entries}
    for entry in manifest.entries:
        data = entries.get(entry.name)
        if data is None:
            if entry.name not in all_names and ctx.enabled("manifest_coverage"):
                ctx.add("integrity", "manifest_coverage", "manifest_lists_absent_entry", entry.name)
            continue
        digest = hashlib.sha256(data).hexdigest()
        if (len(data), digest) != (entry.size, entry.sha256) and ctx.enabled("manifest_digests"):
            ctx.add("integrity", "manifest_digests", "manifest_digest_mismatch", entry.name)
    for name in sorted(set(entries) - listed - {MANIFEST_NAME}):
        if ctx.enabled("manifest_coverage"):
            ctx.add("integrity", "manifest_coverage", "entry_not_in_manifest", name)


def _check_json(ctx: AuditContext, entries: dict[str, bytes]) -> dict[str, bytes]:
    """Entries whose bytes are canonical JSON; the rest are reported and dropped."""
    canonical_entries: dict[str, bytes] = {}
    for name, data in sorted(entries.items()):
        if ctx.enabled("json_canonical"):
            try:
                parse_canonical(data)
            except CanonicalError as exc:
                ctx.add("integrity", "json_canonical", exc.category, name)
                continue
        canonical_entries[name] = data
    return canonical_entries


def _check_sequences(ctx: AuditContext, entries: dict[str, bytes]) -> None:
    if not ctx.enabled("sequence_contiguous"):
        return
    for kind in KINDS:
        if not kind.sequence:
            continue
        indices = sorted(
            index
            for name in entries
            if (found := classify_entry(name)) is not None and found[0] is kind
            for index in [found[1]]
            if index is not None
        )
        for expected, index in enumerate(indices):
            if index != expected:
                ctx.add("integrity", "sequence_contiguous", "sequence_gap", kind.entry_name(index))
                break


CONTAINER_RULES: tuple[str, ...] = (
    "zip_size",
    "zip_structure",
    "entry_count",
    "duplicate_name",
    *(rule for rule, _check in ENTRY_CHECKS),
    "known_entry",
    "manifest_present",
    "manifest_valid",
    "manifest_digests",
    "manifest_coverage",
    "json_canonical",
    "sequence_contiguous",
    "container_canonical",
)


def check_container(ctx: AuditContext) -> dict[str, bytes] | None:
    """Run the integrity phase; return the usable entries by name, or None if unreadable."""
    infos = _open(ctx)
    if infos is None:
        return None
    if len(infos) > MAX_ENTRIES + 1 and ctx.enabled("entry_count"):
        ctx.add("integrity", "entry_count", "too_many_entries")
        return None
    entries = _usable_entries(ctx, infos)
    _check_manifest(ctx, entries, {info.orig_filename for info in infos})
    entries = _check_json(ctx, entries)
    _check_sequences(ctx, entries)
    if not ctx.findings and ctx.enabled("container_canonical") and zip_bytes(entries) != ctx.data:
        ctx.add("integrity", "container_canonical", "container_not_canonical")
    return entries
