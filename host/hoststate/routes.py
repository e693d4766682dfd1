"""Routing tables from /proc/net/route and /proc/net/ipv6_route.

Reference and use counters change with traffic, so they are dropped; every other
column is kept (a changed metric, mask or MTU is a changed route). Rows are sorted:
the kernel's listing order is not part of the routing decision.
"""

from pathlib import Path

from host.hoststate.canonical import canonical_json
from host.hoststate.facet import CanonicalValue, FacetRead
from host.hoststate.procfile import read_proc_lines

# /proc/net/route: Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT
_V4_KEEP = (0, 1, 2, 3, 6, 7, 8, 9, 10)
# /proc/net/ipv6_route: dst dst_len src src_len next_hop metric refcnt use flags iface
_V6_KEEP = (0, 1, 2, 3, 4, 5, 8, 9)


def _rows(lines: list[str], width: int, keep: tuple[int, ...]) -> FacetRead:
    rows: list[CanonicalValue] = []
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if len(fields) != width:
            return FacetRead("unread", reason="parse_failed")
        rows.append([fields[i] for i in keep])
    rows.sort(key=canonical_json)
    return FacetRead("present", canonical=rows, count=len(rows))


def read_ipv4_routes(path: Path) -> FacetRead:
    """IPv4 routes; the header line is checked so a changed format is `parse_failed`."""
    lines = read_proc_lines(path)
    if lines is None:
        return FacetRead("unread", reason="read_failed")
    if not lines or lines[0].split()[:3] != ["Iface", "Destination", "Gateway"]:
        return FacetRead("unread", reason="parse_failed")
    return _rows(lines[1:], 11, _V4_KEEP)


def read_ipv6_routes(path: Path) -> FacetRead:
    """IPv6 routes (the file has no header). A kernel without IPv6 has no file: unread."""
    lines = read_proc_lines(path)
    if lines is None:
        return FacetRead("unread", reason="read_failed")
    return _rows(lines, 10, _V6_KEEP)
