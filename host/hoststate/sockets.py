"""Listening sockets from /proc/net/{tcp,tcp6,udp,udp6}.

Only listening state counts: TCP in LISTEN (0A), and UDP sockets that are bound but
unconnected (state 07; connect() moves a UDP socket to 01), UDP's equivalent of
listening. Connected sockets come and go with traffic and are not host state a
trial could leave behind. The result is a sorted set of (proto, address, port).
These files describe the network namespace of the reading process. A socket whose
holders all belong to one other live trial (`exclude_tags`, host/hoststate/others.py)
is left out and counted; one (proto, address, port) held by several sockets stays
while any of them is not excluded.
"""

import ipaddress
import struct
from pathlib import Path

from host.hoststate.facet import CanonicalValue, FacetRead
from host.hoststate.others import socket_tags
from host.hoststate.procfile import read_proc_lines

TCP_LISTEN = "0A"
UDP_UNCONNECTED = "07"
SOCKET_FILES: tuple[str, ...] = ("tcp", "tcp6", "udp", "udp6")
_HEADERS = (
    ["sl", "local_address", "rem_address", "st"],
    ["sl", "local_address", "remote_address", "st"],
)


def decode_address(hex_addr: str) -> str:
    """Kernel hex (32-bit words in host byte order) to a printable IP address."""
    raw = bytes.fromhex(hex_addr)
    if len(raw) not in (4, 16):
        raise ValueError("address length")
    words = struct.unpack(f"<{len(raw) // 4}I", raw)
    packed = b"".join(struct.pack(">I", w) for w in words)
    return str(ipaddress.ip_address(packed))


Row = tuple[str, str, int, int | None]
"""(proto, address, port, socket inode; None when the row has no readable inode)."""


def _listening(proto: str, lines: list[str]) -> list[Row] | None:
    header = lines[0].split()[:4] if lines else []
    if header not in _HEADERS:
        return None
    out: list[Row] = []
    for line in lines[1:]:
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 4:
            return None
        local, remote, state = fields[1], fields[2], fields[3]
        if remote.count(":") != 1:
            return None
        try:
            addr_hex, port_hex = local.split(":")
            addr, port = decode_address(addr_hex), int(port_hex, 16)
        except ValueError:
            return None
        if (proto.startswith("tcp") and state == TCP_LISTEN) or (
            proto.startswith("udp") and state == UDP_UNCONNECTED
        ):
            inode = int(fields[9]) if len(fields) > 9 and fields[9].isdigit() else None
            out.append((proto, addr, port, inode))
    return out


def read_listening_sockets(
    proc_net: Path,
    exclude_tags: frozenset[str] = frozenset(),
    *,
    proc: Path = Path("/proc"),
    harness_parent: str = "harness",
) -> FacetRead:
    """All four tables; any one unreadable or unparsable makes the facet unread.
    Sockets of `exclude_tags` (found through `proc`) are left out and counted."""
    rows: list[Row] = []
    for proto in SOCKET_FILES:
        lines = read_proc_lines(proc_net / proto)
        if lines is None:
            return FacetRead("unread", reason="read_failed")
        table = _listening(proto, lines)
        if table is None:
            return FacetRead("unread", reason="parse_failed")
        rows.extend(table)
    owners: dict[int, str] = {}
    if exclude_tags:
        inodes = {row[3] for row in rows if row[3]}
        owners = {
            inode: tag
            for inode, tag in socket_tags(proc, inodes, harness_parent).items()
            if tag in exclude_tags
        }
    left_out = [row for row in rows if row[3] in owners]
    found = {(p, a, port) for p, a, port, inode in rows if inode not in owners}
    canonical: list[CanonicalValue] = [[p, a, port] for p, a, port in sorted(found)]
    tags = frozenset(owners[row[3]] for row in left_out if row[3] is not None)
    return FacetRead(
        "present",
        canonical=canonical,
        count=len(canonical),
        excluded=len(left_out),
        excluded_tags=tags,
    )
