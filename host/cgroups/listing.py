"""Listing harness cgroups by name, for `harness gc` and the host-state snapshot.

A SIGKILLed orchestrator leaves cgroups behind (docs/engineering.md §10); they are found by
their place under the harness parent and their name prefix, never by process tree.
"""

import os
from pathlib import Path

from host.cgroups.readings import NameListing


def list_children(mount_point: Path, parent: str, prefix: str) -> NameListing:
    """Names of the directories under `mount_point/parent` that start with `prefix`.

    `absent` only when the mount point itself was listed and has no `parent`;
    any error listing either directory is `unread`.
    """
    try:
        with os.scandir(mount_point) as entries:
            has_parent = any(e.name == parent and e.is_dir(follow_symlinks=False) for e in entries)
    except OSError:
        return NameListing("unread", reason="read_failed")
    if not has_parent:
        return NameListing("absent")
    try:
        with os.scandir(mount_point / parent) as entries:
            names = sorted(
                e.name
                for e in entries
                if e.is_dir(follow_symlinks=False) and e.name.startswith(prefix)
            )
    except OSError:
        return NameListing("unread", reason="read_failed")
    return NameListing("present", names=tuple(names))
