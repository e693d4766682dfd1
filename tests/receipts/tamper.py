"""Ways to damage a receipt ZIP, one defect each, as a forger or a broken disk would.

`forge` rebuilds a well-formed container from raw entries (optionally with a correct
manifest), so a tamper that a forger can make self-consistent at the ZIP level must be
caught by a deeper rule. The byte-level helpers edit the file in place, as corruption
or a careless edit would.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from collections.abc import Mapping
from typing import Any

from receipts.bundle import bundle_entries, manifest_for, zip_bytes, zip_info
from receipts.canonical import canonical
from receipts.recordset import MANIFEST_NAME, RecordSet
from tests.receipts.builders import accepted_model_trial, legacy

_CENTRAL = b"PK\x01\x02"


def good_entries() -> dict[str, bytes]:
    return bundle_entries(accepted_model_trial())


def legacy_entries() -> dict[str, bytes]:
    """good_entries() as a 0.1.0 receipt: where older record versions may stand."""
    return bundle_entries(legacy(accepted_model_trial()))


def forge(entries: Mapping[str, bytes], fix_manifest: bool = True) -> bytes:
    """A deterministic container of `entries`; with fix_manifest, a manifest that matches."""
    entries = dict(entries)
    if fix_manifest:
        entries.pop(MANIFEST_NAME, None)
        entries[MANIFEST_NAME] = canonical(manifest_for(entries).to_json())
    return zip_bytes(entries)


def forge_records(records: RecordSet) -> bytes:
    return zip_bytes(bundle_entries(records))


def edit_json(original: Mapping[str, bytes], name: str, **changes: Any) -> dict[str, bytes]:
    """Entries with one record's JSON fields changed, re-encoded canonically."""
    value = json.loads(original[name])
    value.update(changes)
    return {**original, name: canonical(value)}


def payload_offset(data: bytes, name: str) -> int:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(name)
    return info.header_offset + 30 + len(name.encode())


def flip_byte(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1 :]


def central_header_offset(data: bytes, name: str) -> int:
    """Offset of `name`'s central directory header."""
    position = 0
    while (position := data.find(_CENTRAL, position)) != -1:
        name_length = struct.unpack_from("<H", data, position + 28)[0]
        if data[position + 46 : position + 46 + name_length] == name.encode():
            return position
        position += 4
    raise KeyError(name)


def with_central_crc(data: bytes, name: str, crc: int) -> bytes:
    offset = central_header_offset(data, name) + 16
    return data[:offset] + struct.pack("<L", crc) + data[offset + 4 :]


def patch_name_byte(data: bytes, old: bytes, new: bytes) -> bytes:
    """Replace a placeholder inside entry names in both local and central headers."""
    assert len(old) == len(new) and data.count(old) == 2
    return data.replace(old, new)


def with_flag_bits(data: bytes, name: str, bits: int) -> bytes:
    """Set general-purpose flag bits of `name` in both its local and central header
    (zipfile resets them when writing, so this edits the bytes)."""
    central = central_header_offset(data, name)
    local = struct.unpack_from("<L", data, central + 42)[0]
    out = bytearray(data)
    for offset in (central + 8, local + 6):
        value = struct.unpack_from("<H", out, offset)[0]
        struct.pack_into("<H", out, offset, value | bits)
    return bytes(out)


def custom_zip(items: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    """A container with hand-made ZipInfo entries (for types, flags, compression)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for info, data in items:
            zf.writestr(info, data)
    return buffer.getvalue()


def entries_with_infos(entries: Mapping[str, bytes]) -> list[tuple[zipfile.ZipInfo, bytes]]:
    return [(zip_info(name), entries[name]) for name in sorted(entries)]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
