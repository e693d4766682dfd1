"""The harness cgroup tree: names under the harness parent in every hierarchy.

Every mounted cgroup hierarchy is listed (not only the ones the harness writes
into), keyed by hierarchy (`memory`, `cpu,cpuacct`, `unified`, ...), so a cgroup a
trial left anywhere under a harness parent shows. One that cannot be listed makes the
facet unread.

The parent itself is infrastructure, not a trial's resource: the first trial on a
fresh host creates `harness/` in each hierarchy it uses and leaves it for every later
trial (host/cgroups). A hierarchy whose parent does not exist therefore reads as an
empty list, the same as an empty parent; otherwise every first trial on a host would
read `absent` before and `[]` after and fail `failed_host_state` for that alone.

Names of other live trials' cgroups (`exclude_tags`) are left out and counted; in a
trial's snapshot (`own`) so are names that belong to no trial (attribution.py: by the
tag in the name, then by the membership of their processes).
"""

from pathlib import Path
from typing import Literal

from host.cgroups.errors import CgroupError
from host.cgroups.listing import list_children
from host.cgroups.mounts import read_mounts
from host.hoststate.attribution import Attribution, Owner, OwnTrial, scan_processes
from host.hoststate.facet import CanonicalValue, FacetRead


def _members(group: Path) -> tuple[int, ...] | Literal["vanished"] | None:
    """Pids in `group/cgroup.procs`; None if unreadable while the group exists;
    `vanished` if the group is gone (it is then not there to compare)."""
    try:
        text = (group / "cgroup.procs").read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return "vanished" if not group.is_dir() else None
    try:
        return tuple(int(line) for line in text.split())
    except ValueError:
        return None


def read_cgroup_tree(
    mountinfo: Path,
    parent: str,
    exclude_tags: frozenset[str] = frozenset(),
    *,
    proc: Path = Path("/proc"),
    own: OwnTrial | None = None,
) -> FacetRead:
    """Sorted names under `parent` per hierarchy key, but those of `exclude_tags` and,
    when `own` is given, those of no trial."""
    try:
        mounts = read_mounts(mountinfo)
    except CgroupError as err:
        return FacetRead(
            "unread", reason="parse_failed" if err.category == "parse_failed" else "read_failed"
        )
    if not mounts:
        return FacetRead("absent")
    table = scan_processes(proc, parent, ()) if own is not None else {}
    attribution = Attribution(table, exclude_tags, own)
    tree: dict[str, CanonicalValue] = {}
    count = excluded = unrelated = 0
    tags: set[str] = set()
    for mount in mounts:
        listing = list_children(mount.mount_point, parent, "")
        if listing.state == "unread":
            return FacetRead("unread", reason="read_failed")
        kept: list[CanonicalValue] = []
        for name in listing.names:
            owner: Owner | None = attribution.cgroup_by_name(name)
            if owner is None:
                members = _members(mount.mount_point / parent / name)
                if members == "vanished":
                    continue
                owner = attribution.cgroup_by_members(members)
            if owner.kind == "other" and owner.tag is not None:
                excluded += 1
                tags.add(owner.tag)
            elif owner.kind == "unrelated":
                unrelated += 1
            else:
                kept.append(name)
        tree[mount.key] = kept
        count += len(kept)
    return FacetRead(
        "present",
        canonical=tree,
        count=count,
        excluded=excluded,
        excluded_tags=frozenset(tags),
        unrelated=unrelated,
    )
