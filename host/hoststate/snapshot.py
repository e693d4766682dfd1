"""Taking a host-state snapshot: every facet read, digested and reduced.

The snapshot keeps per facet only its state, the SHA-256 of its canonical JSON, an
item count and closed categories, so it can go into a receipt as it is. Sources are
parameters so a test can point one facet at something unreadable and see `unread`.
Resources of other live trials can be left out (`exclude_tags`, see others.py), and in
a trial's snapshot (`own`) those of no trial (attribution.py); the facet then records
how many items of each, and the other trials' tags.
"""

from dataclasses import dataclass, field
from pathlib import Path

from host.hoststate.attribution import OwnTrial
from host.hoststate.canonical import digest
from host.hoststate.categories import FACETS, FacetName
from host.hoststate.cgrouptree import read_cgroup_tree
from host.hoststate.facet import FacetRead, FacetSnapshot
from host.hoststate.firewall import DEFAULT_COMMANDS, FirewallCommand, read_firewall
from host.hoststate.resolver import read_resolver
from host.hoststate.routes import read_ipv4_routes, read_ipv6_routes
from host.hoststate.sockets import read_listening_sockets


@dataclass(frozen=True)
class Sources:
    """Where each facet is read from (the real host by default)."""

    proc_net: Path = Path("/proc/self/net")
    proc: Path = Path("/proc")
    """Where the processes holding sockets are found (for exclusions)."""
    resolv_conf: Path = Path("/etc/resolv.conf")
    mountinfo: Path = Path("/proc/self/mountinfo")
    harness_parent: str = "harness"
    firewall_commands: tuple[FirewallCommand, ...] = DEFAULT_COMMANDS
    firewall_search_path: str | None = None
    firewall_timeout_s: float = 10.0


@dataclass(frozen=True)
class HostSnapshot:
    """All facets, in the fixed order of `FACETS`."""

    facets: tuple[FacetSnapshot, ...] = field(default=())

    def __post_init__(self) -> None:
        if tuple(f.name for f in self.facets) != FACETS:
            raise ValueError("a snapshot has every facet once, in order")

    def facet(self, name: FacetName) -> FacetSnapshot:
        return self.facets[FACETS.index(name)]


def reduce(name: FacetName, read: FacetRead) -> FacetSnapshot:
    """Keep only what may go into a receipt: state, digests, count, categories."""
    return FacetSnapshot(
        name=name,
        state=read.state,
        sha256=digest(read.canonical) if read.state == "present" else None,
        count=read.count if read.state == "present" else 0,
        reason=read.reason,
        tool=read.tool,
        raw_sha256=read.raw_sha256,
        excluded=read.excluded if read.state == "present" else 0,
        excluded_tags=tuple(sorted(read.excluded_tags)) if read.state == "present" else (),
        unrelated=read.unrelated if read.state == "present" else 0,
    )


def take_snapshot(
    sources: Sources | None = None,
    exclude_tags: frozenset[str] = frozenset(),
    own: OwnTrial | None = None,
) -> HostSnapshot:
    """Read every facet once, leaving out the cgroups and listening sockets that belong
    to the trials of `exclude_tags` (the caller's list of other live trials) and, when
    the snapshot is `own`'s (a trial's), those that belong to no trial."""
    s = sources or Sources()
    reads: dict[FacetName, FacetRead] = {
        "routes_ipv4": read_ipv4_routes(s.proc_net / "route"),
        "routes_ipv6": read_ipv6_routes(s.proc_net / "ipv6_route"),
        "resolver": read_resolver(s.resolv_conf),
        "listening_sockets": read_listening_sockets(
            s.proc_net, exclude_tags, proc=s.proc, harness_parent=s.harness_parent, own=own
        ),
        "cgroups": read_cgroup_tree(
            s.mountinfo, s.harness_parent, exclude_tags, proc=s.proc, own=own
        ),
        "firewall": read_firewall(
            s.firewall_commands,
            search_path=s.firewall_search_path,
            timeout_s=s.firewall_timeout_s,
        ),
    }
    return HostSnapshot(tuple(reduce(name, reads[name]) for name in FACETS))
