"""Listening sockets from /proc/net/{tcp,tcp6,udp,udp6}.

Only listening state counts: TCP in LISTEN (0A), and UDP sockets that are bound but
unconnected (state 07; connect() moves a UDP socket to 01), UDP's equivalent of
listening. Connected sockets come and go with traffic and are not host state a
trial could leave behind. The result is a sorted set of (proto, address, port).
These files describe the network namespace of the reading process.
"""

import ipaddress
import struct
from pathlib import Path

from host.hoststate.facet import CanonicalValue, FacetRead
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


def _listening(proto: str, lines: list[str]) -> list[tuple[str, str, int]] | None:
    header = lines[0].split()[:4] if lines else []
    if header not in _HEADERS:
        return None
    out: list[tuple[str, str, int]] = []
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
            out.append((proto, addr, port))
    return out


def read_listening_sockets(proc_net: Path) -> FacetRead:
    """All four tables; any one unreadable or unparsable makes the facet unread."""
    found: set[tuple[str, str, int]] = set()
    for proto in SOCKET_FILES:
        lines = read_proc_lines(proc_net / proto)
        if lines is None:
            return FacetRead("unread", reason="read_failed")
        rows = _listening(proto, lines)
        if rows is None:
            return FacetRead("unread", reason="parse_failed")
        found.update(rows)
    canonical: list[CanonicalValue] = [[p, a, port] for p, a, port in sorted(found)]
    return FacetRead("present", canonical=canonical, count=len(canonical))
