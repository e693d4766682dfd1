"""Comparing two snapshots facet by facet.

`unread` on either side makes that facet's outcome `unread`, never `unchanged`: a
comparison that could not be made is not evidence that nothing changed. A facet
that went from present to absent (or back) is `changed`. The firewall's raw-bytes
digest is compared apart from its normalised digest.
"""

from dataclasses import dataclass

from host.hoststate.categories import CompareOutcome, FacetName
from host.hoststate.facet import FacetSnapshot
from host.hoststate.snapshot import HostSnapshot


@dataclass(frozen=True)
class FacetComparison:
    """One facet's outcome; `raw_outcome` only for facets with a raw digest."""

    name: FacetName
    outcome: CompareOutcome
    raw_outcome: CompareOutcome | None = None


@dataclass(frozen=True)
class HostComparison:
    """Every facet's outcome and the overall one (changed beats unread beats unchanged)."""

    facets: tuple[FacetComparison, ...]
    overall: CompareOutcome

    def outcome(self, name: FacetName) -> CompareOutcome:
        return next(f.outcome for f in self.facets if f.name == name)


def compare_facet(before: FacetSnapshot, after: FacetSnapshot) -> FacetComparison:
    """Outcome for one facet."""
    if before.name != after.name:
        raise ValueError("facets of different names")
    outcome: CompareOutcome
    if before.state == "unread" or after.state == "unread":
        outcome = "unread"
    else:
        same = (before.state, before.sha256) == (after.state, after.sha256)
        outcome = "unchanged" if same else "changed"
    raw: CompareOutcome | None = None
    if before.name == "firewall":
        if before.raw_sha256 is None or after.raw_sha256 is None:
            raw = "unread"
        else:
            raw = "unchanged" if before.raw_sha256 == after.raw_sha256 else "changed"
    return FacetComparison(before.name, outcome, raw)


def compare(before: HostSnapshot, after: HostSnapshot) -> HostComparison:
    """Outcome for every facet and overall."""
    facets = tuple(compare_facet(b, a) for b, a in zip(before.facets, after.facets, strict=True))
    outcomes = {f.outcome for f in facets}
    overall: CompareOutcome = (
        "changed" if "changed" in outcomes else "unread" if "unread" in outcomes else "unchanged"
    )
    return HostComparison(facets, overall)
