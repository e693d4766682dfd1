"""Closed vocabularies of the host-state snapshot and comparison.

These names go into a receipt as they are; a new situation gets a new name here,
never free text (docs/engineering.md §3).
"""

from typing import Literal

FacetName = Literal[
    "routes_ipv4",
    "routes_ipv6",
    "resolver",
    "listening_sockets",
    "cgroups",
    "firewall",
]
"""Each part of host state a trial must leave as it found it."""

FACETS: tuple[FacetName, ...] = (
    "routes_ipv4",
    "routes_ipv6",
    "resolver",
    "listening_sockets",
    "cgroups",
    "firewall",
)

FacetState = Literal["present", "absent", "unread"]
"""Three-valued, as every probe (docs/engineering.md §2)."""

UnreadReason = Literal[
    "read_failed",
    "parse_failed",
    "tool_missing",
    "tool_failed",
    "tool_timeout",
    "not_read",
]
"""Why a facet could not be read; `not_read`: a trial in a hurry (a second stop signal)
did not read it at all."""

CompareOutcome = Literal["unchanged", "changed", "unread"]
"""Before/after for one facet: `unread` when either side was unread."""

FirewallTool = Literal["nft", "iptables_save"]
"""Which tool produced the firewall ruleset."""
