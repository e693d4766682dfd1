"""One-shot dispatch: the trial was launched by a dispatch receipt bound to a source tree."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import GitObjectId, Identifier, Millis, Sha256Hex, UnixMillis

DispatchCategory = Literal[
    "ok",
    "already_consumed",
    "tree_mismatch",
    "dirty_tree",
    "profile_mismatch",
    "task_mismatch",
    "malformed",
    "ledger_unwritable",
]


class DispatchRecord(Record):
    schema_: Literal["harness.receipt.dispatch/1"] = Field(
        "harness.receipt.dispatch/1", alias="schema"
    )
    category: DispatchCategory
    dispatch_sha256: Sha256Hex
    """Digest of the canonical dispatch receipt that was consumed."""
    profile: Identifier
    task: Identifier
    commit: GitObjectId
    tree: GitObjectId
    issued_unix_ms: UnixMillis
    consumed_unix_ms: UnixMillis | None
    duration_ms: Millis
