"""Which harness source ran: a git commit and tree with a clean check, or an installed RECORD."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import GitObjectId, Millis, Sha256Hex

SourceCategory = Literal[
    "ok",
    "dirty_refused",
    "bytecode_refused",
    "submodule_refused",
    "git_location_refused",
    "unread",
]
"""`ok`, or why a dispatched trial refused its source tree (the first kind of dirt
found, in this order: git location, submodule, bytecode, files), or `unread`."""


class SourceRecord(Record):
    schema_: Literal["harness.receipt.source/1"] = Field("harness.receipt.source/1", alias="schema")
    category: SourceCategory
    kind: Literal["git", "installed"]
    commit: GitObjectId | None
    tree: GitObjectId | None
    tree_state: Literal["clean", "dirty", "unread"]
    installed_record_sha256: Sha256Hex | None
    duration_ms: Millis
