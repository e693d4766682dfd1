"""The suite record (`suite.json`): which suite ran, on which source, and each member.

A suite receipt binds member trial receipts, stored whole inside it; this record says
what the suite was (its file's digest, the harness source), how each member ended, and
for a member with a receipt, which one (trial id, receipt id, ZIP SHA-256) and the
verdict that receipt derives. The audit re-derives every member's verdict from its own
receipt and the aggregate from the members; nothing here is taken on trust.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from receipts.records.base import Part, Record
from receipts.records.source import SourceRecord
from receipts.records.trial import Policy, Verdict
from receipts.types import (
    Count,
    Identifier,
    Index,
    MemberId,
    Sha256Hex,
    TrialId,
    UnixMillis,
    Version,
)

MemberState = Literal["finished", "cancelled", "lost", "failed_to_start"]
"""How the member's process ended, as the executor saw it (harness/suite/executor.py)."""
MissingReason = Literal[
    "cancelled_before_start",
    "cancelled_without_receipt",
    "job_lost",
    "failed_to_start",
    "no_receipt",
    "receipt_invalid",
]
"""Why a member has no receipt in the suite: the suite was cancelled before it started
(or it was stopped and wrote none), the engine lost it, it could not be launched (also:
the host cannot hold its profile at all), it exited without one, or the one it wrote does
not audit (kept out; the member counts as missing, never as a verdict)."""
SUITE_CEILING_BYTES = 8 * 1024 * 1024
"""`suite.json` holds one entry per member (up to 10,000): its own ceiling."""


class SuiteMember(Part):
    member_id: MemberId
    task: Identifier
    language: Literal["python", "javascript"]
    profile: Identifier
    policy: Policy
    script: Identifier | None
    """The scripted policy's name (`scripts/NAME.json` of the task); None for the model."""
    repeat: Index
    state: MemberState
    exit_code: Annotated[int, Field(ge=0, le=255)] | None
    trial_id: TrialId | None
    receipt_id: Sha256Hex | None
    zip_sha256: Sha256Hex | None
    verdict: Verdict | None
    missing: MissingReason | None

    @model_validator(mode="after")
    def _receipt_or_reason(self) -> SuiteMember:
        parts = (self.trial_id, self.receipt_id, self.zip_sha256, self.verdict)
        present = all(part is not None for part in parts)
        if not present and any(part is not None for part in parts):
            raise ValueError("a member's receipt fields come together")
        if present == (self.missing is not None):
            raise ValueError("a member has a receipt or a missing reason, not both")
        if (self.policy != "scripted") != (self.script is None):
            raise ValueError("a script names a scripted member's policy only")
        return self


class VerdictCount(Part):
    verdict: Verdict
    count: Annotated[int, Field(ge=1, le=1_000_000)]


class MissingCount(Part):
    reason: MissingReason
    count: Annotated[int, Field(ge=1, le=1_000_000)]


class SuiteFields(Record):
    """What every version of `suite.json` holds (each version adds its schema id)."""

    suite_id: TrialId
    name: Identifier
    suite_sha256: Sha256Hex
    """SHA-256 of the suite file's bytes."""
    source: SourceRecord
    """The harness source the suite process bound (each member binds its own too)."""
    harness_version: Version
    executor: Literal["local", "slurm"]
    started_unix_ms: UnixMillis
    ended_unix_ms: UnixMillis
    max_concurrency: Count
    """The most members that ran at once."""
    members: Annotated[tuple[SuiteMember, ...], Field(min_length=1, max_length=10_000)]
    verdicts: tuple[VerdictCount, ...]
    """Members with a receipt, by verdict (sorted by verdict, no zero counts)."""
    missing: tuple[MissingCount, ...]
    """Members without one, by reason (sorted by reason, no zero counts)."""

    @model_validator(mode="after")
    def _ordered(self) -> SuiteFields:
        ids = [member.member_id for member in self.members]
        if ids != [f"{n:04d}" for n in range(len(ids))]:
            raise ValueError("member ids are 0000, 0001, ... in order")
        if self.ended_unix_ms < self.started_unix_ms:
            raise ValueError("a suite cannot end before it starts")
        verdicts = [entry.verdict for entry in self.verdicts]
        reasons = [entry.reason for entry in self.missing]
        if verdicts != sorted(set(verdicts)) or reasons != sorted(set(reasons)):
            raise ValueError("aggregate counts are sorted and unique")
        return self


class SuiteRecord(SuiteFields):
    """`suite/3`: a member's verdict may be `accepted_unguarded` (trial/4)."""

    schema_: Literal["harness.receipt.suite/3"] = Field("harness.receipt.suite/3", alias="schema")
    dispatch_sha256: Sha256Hex | None
    """The suite dispatch ticket this suite consumed (`harness suite run --dispatch`);
    every member's dispatch record must name it. None for a suite run without one."""


def aggregate(
    members: tuple[SuiteMember, ...],
) -> tuple[tuple[VerdictCount, ...], tuple[MissingCount, ...]]:
    """The counts a suite record must carry for these members (writer and audit alike)."""
    verdicts: dict[str, int] = {}
    missing: dict[str, int] = {}
    for member in members:
        if member.verdict is not None:
            verdicts[member.verdict] = verdicts.get(member.verdict, 0) + 1
        if member.missing is not None:
            missing[member.missing] = missing.get(member.missing, 0) + 1
    return (
        tuple(VerdictCount(verdict=v, count=n) for v, n in sorted(verdicts.items())),
        tuple(MissingCount(reason=r, count=n) for r, n in sorted(missing.items())),
    )


__all__ = [
    "MemberId",
    "MissingCount",
    "MissingReason",
    "SuiteMember",
    "SuiteRecord",
    "VerdictCount",
    "aggregate",
]
