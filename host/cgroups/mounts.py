"""Where the cgroup hierarchies are mounted, read from /proc/self/mountinfo.

Both `detect()` and the host-state snapshot need the same answer, so it is parsed in
one place. Mount options, not directory names, say which controllers a v1 mount
carries (`cpu,cpuacct` may be co-mounted under either name).
"""

import re
from dataclasses import dataclass
from pathlib import Path

from host.cgroups.categories import CgroupVersion
from host.cgroups.errors import CgroupError

MOUNTINFO = Path("/proc/self/mountinfo")

# Mount options of a v1 cgroup mount that are not controllers.
_V1_FLAGS = frozenset(
    {"rw", "ro", "noprefix", "clone_children", "xattr", "cpuset_v2_mode", "none", "favordynmods"}
)
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class CgroupMount:
    """One mounted cgroup hierarchy.

    `key` identifies the hierarchy without naming a host path: `unified` for cgroup2,
    the sorted controller list (e.g. `cpu,cpuacct`, `name=systemd`) for v1.
    """

    version: CgroupVersion
    key: str
    controllers: frozenset[str]
    mount_point: Path


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> tuple[CgroupMount, ...]:
    """Return the cgroup mounts in `text`, one per hierarchy (first mount wins)."""
    found: dict[str, CgroupMount] = {}
    for line in text.splitlines():
        fields = line.split(" ")
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if sep < 6 or len(fields) < sep + 4:
            raise CgroupError("parse_failed", interface_file="mountinfo")
        fstype, super_opts = fields[sep + 1], fields[sep + 3]
        mount_point = Path(_unescape(fields[4]))
        if fstype == "cgroup2":
            mount = CgroupMount("v2", "unified", frozenset(), mount_point)
        elif fstype == "cgroup":
            tokens = {
                t
                for t in super_opts.split(",")
                if t and t not in _V1_FLAGS and ("=" not in t or t.startswith("name="))
            }
            if not tokens:
                continue
            mount = CgroupMount("v1", ",".join(sorted(tokens)), frozenset(tokens), mount_point)
        else:
            continue
        found.setdefault(mount.key, mount)
    return tuple(found.values())


def read_mounts(mountinfo: Path = MOUNTINFO) -> tuple[CgroupMount, ...]:
    """Read and parse the mount table; `read_failed` if it cannot be read."""
    try:
        text = mountinfo.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        raise CgroupError("read_failed", interface_file="mountinfo") from None
    return parse_mountinfo(text)
