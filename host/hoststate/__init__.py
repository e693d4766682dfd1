"""Snapshot and compare the host state a trial must not change.

Routes, resolver configuration, listening sockets, the harness cgroup tree and the
firewall ruleset, each reduced to a state, a digest and a count so the comparison
can go into a receipt without host paths or raw text.
"""

from host.hoststate.categories import FACETS, CompareOutcome, FacetName, FacetState
from host.hoststate.compare import FacetComparison, HostComparison, compare
from host.hoststate.facet import FacetSnapshot
from host.hoststate.snapshot import HostSnapshot, Sources, take_snapshot

__all__ = [
    "FACETS",
    "CompareOutcome",
    "FacetComparison",
    "FacetName",
    "FacetSnapshot",
    "FacetState",
    "HostComparison",
    "HostSnapshot",
    "Sources",
    "compare",
    "take_snapshot",
]
