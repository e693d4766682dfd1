"""One-shot dispatch: the trial was launched by a dispatch ticket bound to a source tree.

dispatch/2 adds the ticket's scope. A `trial` ticket launches one trial (dispatch/1's
only kind). A `suite` ticket is consumed once by `harness suite run --dispatch`, and each
member trial then records that ticket with the suite id and its own member id (each
member slot itself consumed once): every member's receipt names the suite's ticket, and
the suite audit checks that they all name the one in `suite.json`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from receipts.records.base import Record
from receipts.types import (
    GitObjectId,
    Identifier,
    MemberId,
    Millis,
    Sha256Hex,
    TrialId,
    UnixMillis,
)

DispatchCategoryV1 = Literal[
    "ok",
    "already_consumed",
    "tree_mismatch",
    "dirty_tree",
    "profile_mismatch",
    "task_mismatch",
    "malformed",
    "ledger_unwritable",
]
DispatchCategory = (
    DispatchCategoryV1 | Literal["scope_mismatch", "suite_not_consumed", "suite_mismatch"]
)
"""scope_mismatch: a trial ticket presented as a suite member's, or a suite ticket to a
trial outside a suite. suite_not_consumed: the member's suite never consumed the suite
ticket (no ledger entry, or the entry names another suite). suite_mismatch: a suite
ticket presented to another suite file (refused by `harness suite run`, before any
member runs)."""
DispatchScope = Literal["trial", "suite"]


class DispatchRecord(Record):
    schema_: Literal["harness.receipt.dispatch/2"] = Field(
        "harness.receipt.dispatch/2", alias="schema"
    )
    category: DispatchCategory
    scope: DispatchScope
    dispatch_sha256: Sha256Hex
    """Digest of the canonical ticket that was consumed (the suite's, for a member)."""
    profile: Identifier
    """The trial's profile (a suite ticket names the suite, not a profile)."""
    task: Identifier
    commit: GitObjectId
    tree: GitObjectId
    issued_unix_ms: UnixMillis
    consumed_unix_ms: UnixMillis | None
    """When this trial's own consumption (the ticket, or its member slot) was recorded."""
    duration_ms: Millis
    suite_sha256: Sha256Hex | None
    """A suite ticket's suite file digest; None for a trial ticket."""
    suite_id: TrialId | None
    """The suite run that consumed the suite ticket and this member belongs to."""
    member_id: MemberId | None

    @model_validator(mode="after")
    def _scope(self) -> DispatchRecord:
        suite_fields = (self.suite_sha256, self.suite_id, self.member_id)
        if self.scope == "suite" and None in suite_fields:
            raise ValueError("a suite dispatch names the suite, the suite run and the member")
        if self.scope == "trial" and any(part is not None for part in suite_fields):
            raise ValueError("a trial dispatch names no suite")
        return self
