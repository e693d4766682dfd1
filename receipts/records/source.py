"""Which harness source ran: a git commit and tree with a clean check, or an installed RECORD."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import GitObjectId, Millis, Sha256Hex

SourceCategory = Literal["ok", "dirty_refused", "unread"]


class SourceRecord(Record):
    schema_: Literal["harness.receipt.source/1"] = Field("harness.receipt.source/1", alias="schema")
    category: SourceCategory
    kind: Literal["git", "installed"]
    commit: GitObjectId | None
    tree: GitObjectId | None
    tree_state: Literal["clean", "dirty", "unread"]
    installed_record_sha256: Sha256Hex | None
    duration_ms: Millis
