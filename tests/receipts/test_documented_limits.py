"""The container limits docs/receipts.md promises are the ones the audit enforces, at the
boundary: the documented value passes and one more is refused with its category.

Why literals and not the constants: a test that builds its fixture from the constant
moves with it, and then cannot see the constant change (cosmic-ray's NumberReplacer on
MANIFEST_CEILING_BYTES and MAX_ENTRIES survived the unit suite that way). The numbers
are read from the reviewers' documentation, so the two cannot drift apart either.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from receipts.audit import audit_bytes
from receipts.bundle import zip_bytes, zip_info
from receipts.manifest import ManifestEntry
from receipts.recordset import MANIFEST_NAME
from tests.receipts import tamper

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "receipts.md").read_text(encoding="utf-8")


def _documented(category: str) -> str:
    """The explanation docs/receipts.md gives for an audit category."""
    match = re.search(rf"^\| `{category}` \| (.+) \|$", DOCS, re.MULTILINE)
    assert match is not None, category
    return match.group(1)


def _categories(data: bytes) -> set[str]:
    return {finding.category for finding in audit_bytes(data).findings}


def test_the_documented_limits_are_these() -> None:
    """The values the tests below use are the documented ones."""
    assert _documented("entry_oversize") == "a record over 64 KiB (the manifest: over 4 MiB)"
    assert _documented("too_many_entries") == "more than 20,000 records"


def test_a_manifest_of_4_mib_is_not_oversize_and_one_byte_more_is() -> None:
    """Mutation control: MANIFEST_CEILING_BYTES as 3 MiB or 4*1023*1024 fails the first
    assertion, as 5 MiB or 4*1024*1025 the second."""
    limit = 4 * 1024 * 1024
    for size, oversize in ((limit, False), (limit + 1, True)):
        entries = tamper.good_entries()
        entries[MANIFEST_NAME] = b" " * size  # bytes are not looked at before the size
        found = _categories(zip_bytes(entries))
        assert ("entry_oversize" in found) is oversize, (size, found)
        assert found, size  # never valid


def test_20000_records_are_not_too_many_and_20001_are() -> None:
    """The entry count is checked before any entry is read, so empty entries do. Mutation
    control: MAX_ENTRIES as 19,999 fails the first assertion, as 20,001 the second."""
    for records, too_many in ((20_000, False), (20_001, True)):
        entries = {f"tool_calls/{index:06d}.json": b"" for index in range(records)}
        entries[MANIFEST_NAME] = b""
        found = _categories(zip_bytes(entries))
        assert ("too_many_entries" in found) is too_many, (records, sorted(found)[:5])
        assert found, records


def test_a_manifest_entry_size_is_0_up_to_the_record_ceiling() -> None:
    """An empty entry is a size a manifest can state (the entry's own checks refuse its
    bytes); a negative one is not a size. Mutation control: `ge=0` as `ge=1` fails the
    first assertion, as `ge=-1` the second."""
    entry = {"name": "vm.json", "sha256": "0" * 64}
    assert ManifestEntry.model_validate({**entry, "size": 0}).size == 0
    with pytest.raises(ValidationError):
        ManifestEntry.model_validate({**entry, "size": -1})
    assert ManifestEntry.model_validate({**entry, "size": 64 * 1024}).size == 64 * 1024
    with pytest.raises(ValidationError):
        ManifestEntry.model_validate({**entry, "size": 64 * 1024 + 1})


def test_a_file_of_256_mib_is_not_oversize_and_one_byte_more_is() -> None:
    """docs/receipts.md: `zip_oversize` is a file larger than 256 MiB. Mutation control:
    MAX_ZIP_BYTES as 256*1023*1024 fails the first assertion."""
    assert _documented("zip_oversize") == "the file is larger than 256 MiB"
    limit = 256 * 1024 * 1024
    assert "zip_oversize" not in _categories(bytes(limit))
    assert "zip_oversize" in _categories(bytes(limit + 1))


def test_an_entry_name_of_128_characters_is_safe_and_129_is_not() -> None:
    """docs/receipts.md: `unsafe_entry_name` includes a name over 128 characters. The
    128-character name is merely unknown. Mutation control: `or len(raw) >
    MAX_NAME_LENGTH` as `and`, and MAX_NAME_LENGTH as 127 or 129, fail this test."""
    assert _documented("unsafe_entry_name").endswith(", non-ASCII, over 128 characters")
    for length, unsafe in ((128, False), (129, True)):
        items = tamper.entries_with_infos(tamper.good_entries())
        items.append((zip_info("x" * (length - 5) + ".json"), b"{}"))
        found = _categories(tamper.custom_zip(items))
        assert ("unsafe_entry_name" in found) is unsafe, (length, found)
        assert "unknown_entry" in found or unsafe
