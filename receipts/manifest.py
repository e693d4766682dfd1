"""The manifest: every record's name, size and SHA-256. Its digest is the receipt id."""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from receipts.records.base import Part, Record
from receipts.recordset import ENTRY_NAME_PATTERN
from receipts.types import Sha256Hex

EntryName = Annotated[str, StringConstraints(pattern=ENTRY_NAME_PATTERN)]

MAX_ENTRIES = 20_000
MANIFEST_CEILING_BYTES = 4 * 1024 * 1024


class ManifestEntry(Part):
    name: EntryName
    size: Annotated[int, Field(ge=0, le=Record.CEILING_BYTES)]
    sha256: Sha256Hex


class Manifest(Record):
    schema_: Literal["harness.receipt.manifest/1"] = Field(
        "harness.receipt.manifest/1", alias="schema"
    )
    entries: Annotated[tuple[ManifestEntry, ...], Field(max_length=MAX_ENTRIES)]

    @model_validator(mode="after")
    def _sorted_unique(self) -> Manifest:
        names = [entry.name for entry in self.entries]
        if names != sorted(set(names)) or "manifest.json" in names:
            raise ValueError("entries must be sorted, unique, and not list the manifest")
        return self


def receipt_id(manifest_bytes: bytes) -> str:
    """The receipt id: SHA-256 of the canonical manifest bytes."""
    return hashlib.sha256(manifest_bytes).hexdigest()
