"""Resources of other live trials, which a trial's host-state snapshot leaves out.

Why: two trials on one host each snapshot host state before and after, and each sees
the other's QEMU listening socket and cgroups appear or vanish; both would fail
`failed_host_state` for what the other did. What is left out must be proven to belong
to another trial that is alive, and nothing else:

- alive: a `lease-<tag>` in the trials root whose flock a live process holds
  (host/vm/lease.py). A lease that cannot be probed proves nothing; the trial's own
  tag is never another trial's.
- belongs: a cgroup whose name is that trial's (`trial-<tag>`, `worker-<tag>`, the
  names gc uses, host/vm/leftovers.py); a listening socket every one of whose holding
  processes sits in such a cgroup of that one tag (`/proc/<pid>/fd` → `socket:[inode]`,
  `/proc/<pid>/cgroup`). A socket with any other holder, or none found, stays in.

A trial's leases are taken before it acquires anything and dropped after it released
everything, so the tags listed just before a snapshot cover every resource a
well-behaved trial can have while the snapshot is read. A dead trial's leftovers are
not excluded: they change host state, and whoever sees them change says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

from host.vm.lease import LEASE_PREFIX, is_live
from host.vm.leftovers import CGROUP

_LEASE = re.compile(re.escape(LEASE_PREFIX) + r"([0-9a-f]{8,32})")
_SOCKET_LINK = re.compile(r"socket:\[([0-9]+)\]")


def live_trial_tags(trials_root: Path, own_tag: str) -> frozenset[str]:
    """Tags of the other trials whose lease a live process holds now."""
    try:
        names = [entry.name for entry in trials_root.iterdir()]
    except OSError:
        return frozenset()
    live: set[str] = set()
    for name in names:
        match = _LEASE.fullmatch(name)
        if match is None or match.group(1) == own_tag:
            continue
        try:
            if is_live(trials_root, match.group(1)):
                live.add(match.group(1))
        except OSError:
            continue  # not probed: not proven live
    return frozenset(live)


def cgroup_tag(name: str) -> str | None:
    """The trial tag a harness cgroup name carries (`trial-<tag>`, `worker-<tag>`)."""
    match = CGROUP.fullmatch(name)
    return match.group(1) if match is not None else None


def process_tag(proc: Path, pid: str, parent: str) -> str | None:
    """The one trial tag of the harness cgroups `pid` is in, or None: in none, in
    cgroups of two tags, or unreadable."""
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
    return tags.pop() if len(tags) == 1 else None


def socket_tags(proc: Path, inodes: Collection[int], parent: str) -> dict[int, str]:
    """For each socket inode held only by processes of one trial tag: that tag.

    Scans every process's descriptors once. A process that ends during the scan is
    skipped; a socket whose every holder ended is then unattributed (kept in)."""
    wanted = set(inodes)
    holders: dict[int, set[str | None]] = {}
    if not wanted:
        return {}
    try:
        pids = [entry.name for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return {}
    for pid in pids:
        fd_dir = proc / pid / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        held: set[int] = set()
        for fd in fds:
            try:
                match = _SOCKET_LINK.fullmatch(os.readlink(fd_dir / fd))
            except OSError:
                continue
            if match is not None and int(match.group(1)) in wanted:
                held.add(int(match.group(1)))
        if held:
            tag = process_tag(proc, pid, parent)
            for inode in held:
                holders.setdefault(inode, set()).add(tag)
    owned: dict[int, str] = {}
    for inode, tags in holders.items():
        if len(tags) == 1:
            (tag,) = tags
            if tag is not None:
                owned[inode] = tag
    return owned
