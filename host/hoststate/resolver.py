"""Resolver configuration: the digest of /etc/resolv.conf's bytes.

Bytes, not parsed content: any edit a trial makes is a change, including comments a
resolver ignores, because the harness never needs to write this file. The file is
the subject here, so a missing file (or a dangling symlink, which the resolver also
sees as no file) is `absent`; any other error is `unread`.
"""

import hashlib
from pathlib import Path

from host.hoststate.facet import FacetRead
from host.hoststate.procfile import MAX_BYTES


def read_resolver(path: Path) -> FacetRead:
    """Digest and size of the resolver configuration file."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return FacetRead("absent")
    except OSError:
        return FacetRead("unread", reason="read_failed")
    if len(data) > MAX_BYTES:
        return FacetRead("unread", reason="read_failed")
    return FacetRead(
        "present",
        canonical={"bytes_sha256": hashlib.sha256(data).hexdigest(), "size": len(data)},
        count=len(data.splitlines()),
    )
