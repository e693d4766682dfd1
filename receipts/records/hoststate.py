"""Host state before and after the trial, compared facet by facet."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Part, Record
from receipts.types import Sha256Hex

Comparison = Literal["unchanged", "changed", "unread"]


class FacetComparison(Part):
    """One facet: digests of its normalized canonical form before and after, and the result.

    `raw_bytes` reports separately whether the un-normalized bytes differed, so a
    normalization that hides a real change can be seen; `not_compared` for facets
    whose raw bytes are not kept apart (their digest is over parsed rows).
    """

    before_sha256: Sha256Hex | None
    after_sha256: Sha256Hex | None
    result: Comparison
    raw_bytes: Literal["same", "differ", "unread", "not_compared"]


class HostStateRecord(Record):
    schema_: Literal["harness.receipt.hoststate/1"] = Field(
        "harness.receipt.hoststate/1", alias="schema"
    )
    routes: FacetComparison
    resolver: FacetComparison
    listening_sockets: FacetComparison
    cgroups: FacetComparison
    firewall: FacetComparison

    def facets(self) -> tuple[FacetComparison, ...]:
        return (self.routes, self.resolver, self.listening_sockets, self.cgroups, self.firewall)
