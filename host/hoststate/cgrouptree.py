"""The harness cgroup tree: names under the harness parent in every hierarchy.

Every mounted cgroup hierarchy is listed (not only the ones the harness writes
into), keyed by hierarchy (`memory`, `cpu,cpuacct`, `unified`, ...), so a cgroup a
trial left anywhere under a harness parent shows. A hierarchy whose parent does not
exist is recorded as `null`; one that cannot be listed makes the facet unread.
Names of other live trials' cgroups (`exclude_tags`) are left out and counted.
"""

from pathlib import Path

from host.cgroups.errors import CgroupError
from host.cgroups.listing import list_children
from host.cgroups.mounts import read_mounts
from host.hoststate.facet import CanonicalValue, FacetRead
from host.hoststate.others import cgroup_tag


def read_cgroup_tree(
    mountinfo: Path, parent: str, exclude_tags: frozenset[str] = frozenset()
) -> FacetRead:
    """Sorted names under `parent` per hierarchy key, but those of `exclude_tags`."""
    try:
        mounts = read_mounts(mountinfo)
    except CgroupError as err:
        return FacetRead(
            "unread", reason="parse_failed" if err.category == "parse_failed" else "read_failed"
        )
    if not mounts:
        return FacetRead("absent")
    tree: dict[str, CanonicalValue] = {}
    count = excluded = 0
    tags: set[str] = set()
    for mount in mounts:
        listing = list_children(mount.mount_point, parent, "")
        if listing.state == "unread":
            return FacetRead("unread", reason="read_failed")
        if listing.state == "absent":
            tree[mount.key] = None
            continue
        kept: list[CanonicalValue] = []
        for name in listing.names:
            tag = cgroup_tag(name)
            if tag is not None and tag in exclude_tags:
                excluded += 1
                tags.add(tag)
            else:
                kept.append(name)
        tree[mount.key] = kept
        count += len(kept)
    return FacetRead(
        "present", canonical=tree, count=count, excluded=excluded, excluded_tags=frozenset(tags)
    )
