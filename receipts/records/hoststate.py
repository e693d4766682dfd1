"""Host state before and after the trial, compared facet by facet.

Three versions exist. `harness trial` writes `/3`. `/2` is what a harness before
hoststate/3 wrote: the same comparison without the counts of items that belonged to no
trial, because that harness compared them all. `/1` is older still: no exclusion fields
either, because that harness left nothing out. The audit still reads `/1` and `/2` so
that a reviewer can audit a legitimate receipt made by an older harness
(`recordset.Kind.legacy`); each version is its own closed model, so a record carrying
another version's fields, or missing its own, is refused like any other malformed
record. Code that reads what was left out goes through `excluded_trials` /
`facet_exclusions` / `facet_unrelated`, which give older records their meaning: what
their harness did not leave out is zero.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from receipts.records.base import Part, Record
from receipts.types import Count, Sha256Hex, TrialTag

Comparison = Literal["unchanged", "changed", "unread"]


class FacetComparison(Part):
    """One facet: digests of its normalized canonical form before and after, and the result.

    `raw_bytes` reports separately whether the un-normalized bytes differed, so a
    normalization that hides a real change can be seen; `not_compared` for facets
    whose raw bytes are not kept apart (their digest is over parsed rows).

    `excluded_before` / `excluded_after`: items left out of that snapshot because they
    provably belonged to another trial that was alive then (its lease held; a cgroup
    named for it, a listening socket held only by its processes).

    `unrelated_before` / `unrelated_after`: items left out because they belonged to no
    trial: neither this one (its tag in the name, a process of its own: the orchestrator,
    a descendant, a member of its cgroups) nor another live one. Other programs, a test
    suite's VMs, a scheduler's jobs, a dead trial's leftovers. A listening socket with no
    holder found is not counted here: it stays compared.

    The digests and the result are over what remained. Only `cgroups` and
    `listening_sockets` leave items out; routes, resolver and firewall compare all.
    """

    before_sha256: Sha256Hex | None
    after_sha256: Sha256Hex | None
    result: Comparison
    raw_bytes: Literal["same", "differ", "unread", "not_compared"]
    excluded_before: Count
    excluded_after: Count
    unrelated_before: Count
    unrelated_after: Count


class HostStateRecord(Record):
    """`excluded_trials`: the tags of the other live trials whose items some facet left
    out (sorted, unique); empty exactly when nothing was left out as another trial's.
    The audit refuses this trial's own tag here (a trial cannot excuse what it left
    behind)."""

    schema_: Literal["harness.receipt.hoststate/3"] = Field(
        "harness.receipt.hoststate/3", alias="schema"
    )
    routes: FacetComparison
    resolver: FacetComparison
    listening_sockets: FacetComparison
    cgroups: FacetComparison
    firewall: FacetComparison
    excluded_trials: Annotated[tuple[TrialTag, ...], Field(max_length=64)]

    def facets(self) -> tuple[FacetComparison, ...]:
        return (self.routes, self.resolver, self.listening_sockets, self.cgroups, self.firewall)

    @model_validator(mode="after")
    def _exclusions_are_accounted(self) -> HostStateRecord:
        if self.excluded_trials != tuple(sorted(set(self.excluded_trials))):
            raise ValueError("excluded_trials is sorted and unique")
        never = (self.routes, self.resolver, self.firewall)
        if any(
            f.excluded_before or f.excluded_after or f.unrelated_before or f.unrelated_after
            for f in never
        ):
            raise ValueError("only cgroups and listening sockets leave items out")
        excluded = any(f.excluded_before or f.excluded_after for f in self.facets())
        if excluded != bool(self.excluded_trials):
            raise ValueError("excluded_trials is non-empty exactly when items were excluded")
        return self


class FacetComparisonV2(Part):
    """One facet as `harness.receipt.hoststate/2` recorded it: no counts of items that
    belonged to no trial (that harness compared them all).

    Digests of its normalized canonical form before and after, and the result.

    `raw_bytes` reports separately whether the un-normalized bytes differed, so a
    normalization that hides a real change can be seen; `not_compared` for facets
    whose raw bytes are not kept apart (their digest is over parsed rows).

    `excluded_before` / `excluded_after`: items left out of that snapshot because they
    provably belonged to another trial that was alive then (its lease held; a cgroup
    named for it, a listening socket held only by its processes). The digests and the
    result are over what remained. Only `cgroups` and `listening_sockets` exclude.
    """

    before_sha256: Sha256Hex | None
    after_sha256: Sha256Hex | None
    result: Comparison
    raw_bytes: Literal["same", "differ", "unread", "not_compared"]
    excluded_before: Count
    excluded_after: Count


class HostStateRecordV2(Record):
    """The record of `harness.receipt.hoststate/2`, read by the audit only (never written).

    `excluded_trials`: the tags of the other live trials whose items some facet left
    out (sorted, unique); empty exactly when nothing was left out. The audit refuses
    this trial's own tag here (a trial cannot excuse what it left behind)."""

    schema_: Literal["harness.receipt.hoststate/2"] = Field(
        "harness.receipt.hoststate/2", alias="schema"
    )
    routes: FacetComparisonV2
    resolver: FacetComparisonV2
    listening_sockets: FacetComparisonV2
    cgroups: FacetComparisonV2
    firewall: FacetComparisonV2
    excluded_trials: Annotated[tuple[TrialTag, ...], Field(max_length=64)]

    def facets(self) -> tuple[FacetComparisonV2, ...]:
        return (self.routes, self.resolver, self.listening_sockets, self.cgroups, self.firewall)

    @model_validator(mode="after")
    def _exclusions_are_accounted(self) -> HostStateRecordV2:
        if self.excluded_trials != tuple(sorted(set(self.excluded_trials))):
            raise ValueError("excluded_trials is sorted and unique")
        never = (self.routes, self.resolver, self.firewall)
        if any(f.excluded_before or f.excluded_after for f in never):
            raise ValueError("only cgroups and listening sockets exclude items")
        excluded = any(f.excluded_before or f.excluded_after for f in self.facets())
        if excluded != bool(self.excluded_trials):
            raise ValueError("excluded_trials is non-empty exactly when items were excluded")
        return self


class FacetComparisonV1(Part):
    """One facet as `harness.receipt.hoststate/1` recorded it: digests, result and raw-bytes
    reading, with no exclusion counts (that harness left nothing out of a snapshot)."""

    before_sha256: Sha256Hex | None
    after_sha256: Sha256Hex | None
    result: Comparison
    raw_bytes: Literal["same", "differ", "unread", "not_compared"]


class HostStateRecordV1(Record):
    """The host-state record before exclusions existed, read by the audit only (never
    written). Exactly its old fields: a `/1` record is a comparison over everything each
    snapshot saw."""

    schema_: Literal["harness.receipt.hoststate/1"] = Field(
        "harness.receipt.hoststate/1", alias="schema"
    )
    routes: FacetComparisonV1
    resolver: FacetComparisonV1
    listening_sockets: FacetComparisonV1
    cgroups: FacetComparisonV1
    firewall: FacetComparisonV1

    def facets(self) -> tuple[FacetComparisonV1, ...]:
        return (self.routes, self.resolver, self.listening_sockets, self.cgroups, self.firewall)


AnyHostStateRecord = HostStateRecord | HostStateRecordV2 | HostStateRecordV1
"""A host-state record of any version the audit reads."""


def excluded_trials(record: AnyHostStateRecord) -> tuple[str, ...]:
    """The other live trials whose items the snapshots left out; none for `/1`, whose
    harness excluded nothing (so `/1` can never excuse anything, this trial's or another's)."""
    if isinstance(record, HostStateRecord | HostStateRecordV2):
        return record.excluded_trials
    return ()


AnyFacetComparison = FacetComparison | FacetComparisonV2 | FacetComparisonV1


def facet_exclusions(facet: AnyFacetComparison) -> tuple[int, int]:
    """How many items the before and after snapshots left out of this facet as other
    live trials'; (0, 0) for a `/1` facet, which had nothing left out."""
    if isinstance(facet, FacetComparison | FacetComparisonV2):
        return facet.excluded_before, facet.excluded_after
    return 0, 0


def facet_unrelated(facet: AnyFacetComparison) -> tuple[int, int]:
    """How many items the before and after snapshots left out of this facet as no trial's;
    (0, 0) before `/3`, whose harness compared them all."""
    if isinstance(facet, FacetComparison):
        return facet.unrelated_before, facet.unrelated_after
    return 0, 0
