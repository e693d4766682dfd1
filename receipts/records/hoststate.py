"""Host state before and after the trial, compared facet by facet.

`harness trial` writes `/3`. The audit also reads `/2` (the same comparison without the
counts of items that belonged to no trial) and `/1` (no exclusion fields either): their
models, and `excluded_trials` / `facet_exclusions` / `facet_unrelated`, through which
code reads what any version left out, are in receipts/records/legacy.py.
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
