"""The guest runtime gate: the uploaded code was verified against its pin table before import."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import Count, Millis, Sha256Hex

GateCategory = Literal[
    "ok",
    "pin_table_mismatch",
    "unlisted_importable",
    "unlisted_file",
    "special_file",
    "pycache_present",
    "missing_file",
    "size_mismatch",
    "digest_mismatch",
    "symlink",
    "not_first_on_path",
    "foreign_path_entry",
    "bytecode_writing_on",
    "root_writable",
    "hard_link",
    "unreadable_directory",
    "too_deep",
    "unread",
]
"""`ok` also says the runtime root was on a read-only mount (gate/1 receipts written
before `root_writable` existed did not check it)."""


class GateRecord(Record):
    schema_: Literal["harness.receipt.gate/1"] = Field("harness.receipt.gate/1", alias="schema")
    category: GateCategory
    pin_table_sha256: Sha256Hex
    files_verified: Count
    duration_ms: Millis
