"""Listening sockets from /proc/net/{tcp,tcp6,udp,udp6}.

Only listening state counts: TCP in LISTEN (0A), and UDP sockets that are bound but
unconnected (state 07; connect() moves a UDP socket to 01), UDP's equivalent of
listening. Connected sockets come and go with traffic and are not host state a
trial could leave behind. The result is a sorted set of (proto, address, port).
These files describe the network namespace of the reading process. A socket whose
holders all belong to one other live trial (`exclude_tags`, host/hoststate/others.py),
or, in a trial's snapshot, whose holders belong to no trial (attribution.py), is left
out and counted; one (proto, address, port) held by several sockets stays while any
of them is compared.
"""

import ipaddress
import struct
from pathlib import Path

from host.hoststate.attribution import UNATTRIBUTED, Attribution, Owner, OwnTrial, scan_processes
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


def _read_rows(proc_net: Path) -> list[Row] | FacetRead:
    """Every listening row of the four tables, or the facet unread."""
    rows: list[Row] = []
    for proto in SOCKET_FILES:
        lines = read_proc_lines(proc_net / proto)
        if lines is None:
            return FacetRead("unread", reason="read_failed")
        table = _listening(proto, lines)
        if table is None:
            return FacetRead("unread", reason="parse_failed")
        rows.extend(table)
    return rows


def _vanished(proc_net: Path, inodes: set[int]) -> set[int]:
    """Which of `inodes` (sockets no holder was found for) are gone from a second read of
    the tables: closed while the processes were scanned, so not there to compare. An
    unreadable second read removes nothing."""
    if not inodes:
        return set()
    again = _read_rows(proc_net)
    if isinstance(again, FacetRead):
        return set()
    return inodes - {row[3] for row in again}


def read_listening_sockets(
    proc_net: Path,
    exclude_tags: frozenset[str] = frozenset(),
    *,
    proc: Path = Path("/proc"),
    harness_parent: str = "harness",
    own: OwnTrial | None = None,
) -> FacetRead:
    """All four tables; any one unreadable or unparsable makes the facet unread.
    Each socket is attributed through its holders (attribution.py, found through
    `proc`): those of another live trial (`exclude_tags`) and, when `own` is given,
    those of no trial are left out and counted; the rest is compared."""
    rows = _read_rows(proc_net)
    if isinstance(rows, FacetRead):
        return rows
    owners: dict[int, Owner] = {}
    if exclude_tags or own is not None:
        inodes = {row[3] for row in rows if row[3]}
        attribution = Attribution(scan_processes(proc, harness_parent, inodes), exclude_tags, own)
        owners = attribution.sockets(inodes)
        vanished = _vanished(proc_net, {i for i, o in owners.items() if o == UNATTRIBUTED})
        rows = [row for row in rows if row[3] not in vanished]

    def owner(row: Row) -> Owner:
        return owners.get(row[3], UNATTRIBUTED) if row[3] else UNATTRIBUTED

    found = {(p, a, port) for p, a, port, inode in rows if owner((p, a, port, inode)).compared}
    canonical: list[CanonicalValue] = [[p, a, port] for p, a, port in sorted(found)]
    others = [owner(row) for row in rows if owner(row).kind == "other"]
    return FacetRead(
        "present",
        canonical=canonical,
        count=len(canonical),
        excluded=len(others),
        excluded_tags=frozenset(o.tag for o in others if o.tag is not None),
        unrelated=sum(1 for row in rows if owner(row).kind == "unrelated"),
    )
