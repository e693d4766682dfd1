"""Who a cgroup or a listening socket belongs to: this trial, another live trial, or no trial.

Why: a host is shared. Other programs, a test suite's VMs, Slurm jobs and dead trials'
leftovers open and close listening sockets and create and remove cgroups while a trial
runs. A snapshot that compared all of it would fail `failed_host_state` for what others
did. So each item is attributed, and only what is this trial's (or what cannot be
attributed) is compared; the rest is counted:

- a process is **this trial's** when it is the orchestrator (`OwnTrial.pid`) or a
  descendant of it, or when it sits in a harness cgroup named with this trial's tag
  (`trial-<tag>`, `worker-<tag>`: QEMU, the host worker, the socat helpers QEMU forks,
  which are re-parented but stay in QEMU's cgroup). Escaping both needs root on the
  host, which nothing the agent runs has: the agent's code runs in the guest.
- a process is **another live trial's** when it is in harness cgroups of exactly one tag
  and that tag's lease is held (others.py); **no trial's** otherwise.
- a listening socket is this trial's when any holder is; another live trial's when every
  holder is that one trial's; no trial's when it has holders and neither applies. A
  socket with no holder found (a kernel socket, or its holder ended mid-scan) is
  **unattributed** and stays compared: not proven to be someone else's.
- a cgroup under the harness parent is this trial's when its name carries this trial's
  tag or any of its member processes is this trial's; another live trial's by name
  (others.py); no trial's otherwise. One whose members cannot be read stays compared,
  unless it vanished meanwhile (then it is not there to compare).

Without an `OwnTrial` (a snapshot taken outside a trial), nothing is "no trial's": only
another live trial's items are left out, as before hoststate/3.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.hoststate.others import cgroup_tag

_SOCKET_LINK = re.compile(r"socket:\[([0-9]+)\]")

OwnerKind = Literal["own", "other", "unrelated", "unattributed"]


@dataclass(frozen=True)
class Owner:
    """An attribution: `tag` is the other live trial's exactly when `kind` is `other`."""

    kind: OwnerKind
    tag: str | None = None

    @property
    def compared(self) -> bool:
        """Whether the item stays in the facet's compared set."""
        return self.kind in ("own", "unattributed")


OWN, UNRELATED, UNATTRIBUTED = Owner("own"), Owner("unrelated"), Owner("unattributed")


@dataclass(frozen=True)
class OwnTrial:
    """The trial taking the snapshot: its tag and its orchestrator's process id."""

    tag: str
    pid: int


@dataclass(frozen=True)
class ProcessInfo:
    ppid: int | None
    tags: frozenset[str]
    """Trial tags of the harness cgroups the process sits in (any hierarchy)."""
    sockets: frozenset[int]
    """Inodes of the sockets it holds (only those asked for)."""


def _ppid(proc: Path, pid: str) -> int | None:
    try:
        stat = (proc / pid / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def _tags(proc: Path, pid: str, parent: str) -> frozenset[str] | None:
    """Tags of the harness cgroups `pid` is in; None if its cgroup file cannot be read."""
    try:
        lines = (proc / pid / "cgroup").read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    tags: set[str] = set()
    for line in lines:
        parts = line.split(":", 2)[-1].split("/")
        if len(parts) >= 2 and parts[-2] == parent:
            tag = cgroup_tag(parts[-1])
            if tag is not None:
                tags.add(tag)
    return frozenset(tags)


def _sockets(proc: Path, pid: str, wanted: Collection[int]) -> frozenset[int]:
    fd_dir = proc / pid / "fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return frozenset()
    held: set[int] = set()
    for fd in fds:
        try:
            match = _SOCKET_LINK.fullmatch(os.readlink(fd_dir / fd))
        except OSError:
            continue
        if match is not None and int(match.group(1)) in wanted:
            held.add(int(match.group(1)))
    return frozenset(held)


def scan_processes(proc: Path, parent: str, sockets: Collection[int]) -> dict[int, ProcessInfo]:
    """Every process once: parent pid, harness cgroup tags, which of `sockets` it holds.
    A process whose cgroup file cannot be read (it ended) is left out."""
    try:
        pids = [entry.name for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return {}
    wanted = frozenset(sockets)
    table: dict[int, ProcessInfo] = {}
    for pid in pids:
        tags = _tags(proc, pid, parent)
        if tags is None:
            continue
        held = _sockets(proc, pid, wanted) if wanted else frozenset()
        table[int(pid)] = ProcessInfo(_ppid(proc, pid), tags, held)
    return table


def descendants(table: dict[int, ProcessInfo], root: int) -> frozenset[int]:
    """`root` and every process whose parent chain reaches it."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        if info.ppid is not None:
            children.setdefault(info.ppid, []).append(pid)
    found, stack = {root}, [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return frozenset(found)


class Attribution:
    """Attributes processes, sockets and cgroups from one process scan."""

    def __init__(
        self,
        table: dict[int, ProcessInfo],
        live_others: frozenset[str],
        own: OwnTrial | None = None,
    ) -> None:
        self._table = table
        self._live = live_others - ({own.tag} if own is not None else set())
        self._own = own
        self._own_tree = descendants(table, own.pid) if own is not None else frozenset()

    def process(self, pid: int) -> Owner:
        info = self._table.get(pid)
        if self._own is not None and (
            pid in self._own_tree or (info is not None and self._own.tag in info.tags)
        ):
            return OWN
        if info is not None and len(info.tags) == 1:
            (tag,) = info.tags
            if tag in self._live:
                return Owner("other", tag)
        return UNRELATED if self._own is not None else UNATTRIBUTED

    def sockets(self, inodes: Collection[int]) -> dict[int, Owner]:
        """The owner of each of `inodes` (all of them were asked for in the scan)."""
        holders: dict[int, set[Owner]] = {inode: set() for inode in inodes}
        for pid, info in self._table.items():
            for inode in info.sockets:
                if inode in holders:
                    holders[inode].add(self.process(pid))
        return {inode: self._socket(owners) for inode, owners in holders.items()}

    def _socket(self, owners: set[Owner]) -> Owner:
        if not owners or OWN in owners:
            return OWN if owners else UNATTRIBUTED
        if len(owners) == 1:
            (only,) = owners
            if only.kind == "other":
                return only
        return UNRELATED if self._own is not None else UNATTRIBUTED

    def cgroup_by_name(self, name: str) -> Owner | None:
        """This trial's or another live trial's by the tag in `name`; None when the name
        does not decide (then `cgroup_by_members`)."""
        tag = cgroup_tag(name)
        if self._own is not None and tag == self._own.tag:
            return OWN
        if tag is not None and tag in self._live:
            return Owner("other", tag)
        return None if self._own is not None else UNATTRIBUTED

    def cgroup_by_members(self, members: tuple[int, ...] | None) -> Owner:
        """`members`: the pids in the cgroup's `cgroup.procs`; None if it could not be read
        (then it stays compared)."""
        if members is None:
            return UNATTRIBUTED
        return OWN if any(self.process(pid) == OWN for pid in members) else UNRELATED
