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
  processes sits in such a cgroup of that one tag (attribution.py reads
  `/proc/<pid>/fd` → `socket:[inode]` and `/proc/<pid>/cgroup`).

A trial's leases are taken before it acquires anything and dropped after it released
everything, so the tags listed just before a snapshot cover every resource a
well-behaved trial can have while the snapshot is read. A dead trial's leftovers are
not left out as another live trial's: since hoststate/3 they are counted as no
trial's (attribution.py), like any other program's.
"""

from __future__ import annotations

import re
from pathlib import Path

from host.vm.lease import LEASE_PREFIX, is_live
from host.vm.leftovers import CGROUP

_LEASE = re.compile(re.escape(LEASE_PREFIX) + r"([0-9a-f]{8,32})")


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
