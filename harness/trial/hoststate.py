"""Turn two host snapshots into the closed host-state record.

The record has one `routes` facet; the host reads IPv4 and IPv6 routes apart, so the
two are joined here: the digest covers both, and the result is the worse of the two
(changed beats unread beats unchanged). Items a snapshot left out as another live
trial's are counted per facet and side, and their trials' tags listed once; items it
left out as no trial's (other programs' activity) are counted per facet and side.
"""

from __future__ import annotations

import hashlib

from host.hoststate.categories import FACETS, CompareOutcome, FacetName
from host.hoststate.compare import compare_facet
from host.hoststate.facet import FacetSnapshot
from host.hoststate.snapshot import HostSnapshot
from receipts.canonical import canonical
from receipts.records import FacetComparison, HostStateRecord

_SEVERITY: dict[CompareOutcome, int] = {"unchanged": 0, "unread": 1, "changed": 2}


def _digest(facets: list[FacetSnapshot]) -> str | None:
    if any(f.state == "unread" or f.sha256 is None for f in facets):
        return None
    return hashlib.sha256(canonical([[f.name, f.state, f.sha256] for f in facets])).hexdigest()


def _comparison(before: list[FacetSnapshot], after: list[FacetSnapshot]) -> FacetComparison:
    outcomes = [compare_facet(b, a) for b, a in zip(before, after, strict=True)]
    result = max((o.outcome for o in outcomes), key=lambda outcome: _SEVERITY[outcome])
    raws = [o.raw_outcome for o in outcomes if o.raw_outcome is not None]
    raw = "not_compared"
    if raws:
        worst = max(raws, key=lambda outcome: _SEVERITY[outcome])
        raw = {"unchanged": "same", "changed": "differ", "unread": "unread"}[worst]
    return FacetComparison(
        before_sha256=_digest(before),
        after_sha256=_digest(after),
        result=result,
        raw_bytes=raw,
        excluded_before=sum(f.excluded for f in before),
        excluded_after=sum(f.excluded for f in after),
        unrelated_before=sum(f.unrelated for f in before),
        unrelated_after=sum(f.unrelated for f in after),
    )


def host_state_record(before: HostSnapshot, after: HostSnapshot) -> HostStateRecord:
    by_name_before = {f.name: f for f in before.facets}
    by_name_after = {f.name: f for f in after.facets}

    def pick(*names: FacetName) -> FacetComparison:
        return _comparison([by_name_before[n] for n in names], [by_name_after[n] for n in names])

    return HostStateRecord(
        routes=pick("routes_ipv4", "routes_ipv6"),
        resolver=pick("resolver"),
        listening_sockets=pick("listening_sockets"),
        cgroups=pick("cgroups"),
        firewall=pick("firewall"),
        excluded_trials=tuple(
            sorted({tag for f in (*before.facets, *after.facets) for tag in f.excluded_tags})
        ),
    )


def unread_snapshot() -> HostSnapshot:
    """A snapshot that read nothing: what a trial in a hurry (a second stop signal)
    records instead of reading the host again. Every facet compares `unread`, never
    `unchanged`: a comparison not made is not evidence that nothing changed."""
    return HostSnapshot(
        tuple(
            FacetSnapshot(name=name, state="unread", sha256=None, count=0, reason="not_read")
            for name in FACETS
        )
    )
