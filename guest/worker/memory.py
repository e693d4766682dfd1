"""Memory headroom: the least free memory across the worker's cgroups and the host.

Why each level: a cgroup limit anywhere above the worker (the guest's worker cgroup,
the trial's QEMU cgroup on the host, a container's) can OOM-kill it, and the host can
run out before any limit is reached. Page cache is reclaimable, so it is not counted as
used: per level `limit - (usage - inactive_file)` (cgroup v2 `memory.current` counts
cache, which made other tools refuse models wrongly). Both cgroup v1 (hybrid hosts, like
this one) and v2 are read; which level decided is part of the answer.

Reading fails closed: a file that should be there and is not, or does not parse, raises
`HeadroomUnread`; the caller refuses rather than guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from receipts.kernelfacts import CGROUP_UNLIMITED, mem_available

Scope = Literal["self", "ancestor", "host"]

UNLIMITED: Final = CGROUP_UNLIMITED
"""Limits at or above this are "no limit" (v1 writes 9223372036854771712)."""


class HeadroomUnread(Exception):
    """A memory figure that should be readable was not (docs/engineering.md §2: unread)."""


@dataclass(frozen=True)
class Headroom:
    bytes: int
    scope: Scope


@dataclass(frozen=True)
class _Level:
    directory: Path
    version: Literal[1, 2]


def _read_int(path: Path) -> int:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise HeadroomUnread(path.name) from exc
    if text == "max":
        return UNLIMITED
    try:
        return int(text)
    except ValueError as exc:
        raise HeadroomUnread(path.name) from exc


def _stat_field(path: Path, field: str) -> int:
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HeadroomUnread(path.name) from exc
    for line in lines:
        key, _, value = line.partition(" ")
        if key == field:
            try:
                return int(value)
            except ValueError as exc:
                raise HeadroomUnread(path.name) from exc
    raise HeadroomUnread(path.name)


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fstype, super options) of every mount."""
    out: list[tuple[str, str, str, set[str]]] = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        out.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return out


def _relative(cgroup_path: str, mount_root: str) -> str | None:
    if mount_root == "/":
        return cgroup_path
    if cgroup_path == mount_root or cgroup_path.startswith(mount_root.rstrip("/") + "/"):
        return cgroup_path[len(mount_root.rstrip("/")) :] or "/"
    return None


def discover_levels(cgroup_text: str, mountinfo_text: str) -> list[_Level]:
    """The worker's memory cgroup and every ancestor up to the mount's root, innermost first.

    Prefers the v1 memory controller when it is mounted (hybrid hosts have an empty
    cgroup2 tree beside it); otherwise the unified v2 tree. No memory controller at all
    is an empty list: then only the host's MemAvailable limits us.
    """
    v1_path: str | None = None
    v2_path: str | None = None
    for line in cgroup_text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    mounts = _mounts(mountinfo_text)
    chosen: tuple[Path, str, Literal[1, 2]] | None = None
    if v1_path is not None:
        for root, point, fstype, options in mounts:
            if fstype == "cgroup" and "memory" in options:
                rel = _relative(v1_path, root)
                if rel is not None:
                    chosen = (Path(point), rel, 1)
                    break
    if chosen is None and v2_path is not None:
        for root, point, fstype, _options in mounts:
            if fstype == "cgroup2":
                rel = _relative(v2_path, root)
                if rel is not None and (Path(point) / "cgroup.controllers").exists():
                    available = (Path(point) / "cgroup.controllers").read_text().split()
                    if "memory" in available:
                        chosen = (Path(point), rel, 2)
                        break
    if chosen is None:
        return []
    mount_point, rel, version = chosen
    parts = [p for p in rel.split("/") if p]
    levels: list[_Level] = []
    for depth in range(len(parts), -1, -1):
        directory = mount_point.joinpath(*parts[:depth])
        if version == 2 and depth == 0:
            break  # the v2 root has no memory.max
        levels.append(_Level(directory, version))
    return levels


def _level_headroom(level: _Level) -> int | None:
    """limit - (usage - inactive_file) for one level; None when it has no limit."""
    d = level.directory
    if level.version == 1:
        limit = _read_int(d / "memory.limit_in_bytes")
        memsw = d / "memory.memsw.limit_in_bytes"
        sw_limit = _read_int(memsw) if memsw.exists() else UNLIMITED
        if limit >= UNLIMITED and sw_limit >= UNLIMITED:
            # No limit at this level: its memory.stat is not needed, and it is the
            # costly file (the v1 root's sums the whole machine, every 25 ms).
            return None
        inactive = _stat_field(d / "memory.stat", "total_inactive_file")
        candidates: list[int] = []
        if limit < UNLIMITED:
            candidates.append(limit - (_read_int(d / "memory.usage_in_bytes") - inactive))
        if sw_limit < UNLIMITED:
            used = _read_int(d / "memory.memsw.usage_in_bytes") - inactive
            candidates.append(sw_limit - used)
        return min(candidates)
    limit = _read_int(d / "memory.max")
    if limit >= UNLIMITED:
        return None
    inactive = _stat_field(d / "memory.stat", "inactive_file")
    return limit - (_read_int(d / "memory.current") - inactive)


def host_available(meminfo_text: str) -> int:
    available = mem_available(meminfo_text)
    if available is None:
        raise HeadroomUnread("meminfo")
    return available


class HeadroomReader:
    """Reads headroom for this process; paths are parameters so tests can fake v2."""

    def __init__(
        self,
        cgroup_file: Path = Path("/proc/self/cgroup"),
        mountinfo_file: Path = Path("/proc/self/mountinfo"),
        meminfo_file: Path = Path("/proc/meminfo"),
    ) -> None:
        self._cgroup_file = cgroup_file
        self._mountinfo_file = mountinfo_file
        self._meminfo_file = meminfo_file
        self._discovered: tuple[str, list[_Level]] | None = None

    def _text(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HeadroomUnread(path.name) from exc

    def levels(self) -> list[_Level]:
        """Follows the worker's cgroup membership, which is re-read every time.

        A worker moved into another cgroup sees the new one at its next reading. The
        mount table is parsed again only when the membership text changes: parsing it
        was a third of a reading (~0.4 ms of ~1.5 ms here), and the watchdog reads every
        25 ms. A cgroup mount that goes away still fails closed: its files stop reading.
        """
        cgroup_text = self._text(self._cgroup_file)
        cached = self._discovered
        if cached is not None and cached[0] == cgroup_text:
            return cached[1]
        levels = discover_levels(cgroup_text, self._text(self._mountinfo_file))
        self._discovered = (cgroup_text, levels)
        return levels

    def read(self) -> Headroom:
        """The minimum headroom and the scope that decided it (innermost wins ties)."""
        best = Headroom(host_available(self._text(self._meminfo_file)), "host")
        for depth, level in reversed(list(enumerate(self.levels()))):
            value = _level_headroom(level)
            if value is None:
                continue
            value = max(value, 0)
            if value <= best.bytes:
                best = Headroom(value, "self" if depth == 0 else "ancestor")
        return best
