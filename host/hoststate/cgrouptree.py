"""The harness cgroup tree: names under the harness parent in every hierarchy.

Every mounted cgroup hierarchy is listed (not only the ones the harness writes
into), keyed by hierarchy (`memory`, `cpu,cpuacct`, `unified`, ...), so a cgroup a
trial left anywhere under a harness parent shows. A hierarchy whose parent does not
exist is recorded as `null`; one that cannot be listed makes the facet unread.
"""

from pathlib import Path

from host.cgroups.errors import CgroupError
from host.cgroups.listing import list_children
from host.cgroups.mounts import read_mounts
from host.hoststate.facet import CanonicalValue, FacetRead


def read_cgroup_tree(mountinfo: Path, parent: str) -> FacetRead:
    """Sorted names under `parent` per hierarchy key."""
    try:
        mounts = read_mounts(mountinfo)
    except CgroupError as err:
        return FacetRead(
            "unread", reason="parse_failed" if err.category == "parse_failed" else "read_failed"
        )
    if not mounts:
        return FacetRead("absent")
    tree: dict[str, CanonicalValue] = {}
    count = 0
    for mount in mounts:
        listing = list_children(mount.mount_point, parent, "")
        if listing.state == "unread":
            return FacetRead("unread", reason="read_failed")
        if listing.state == "absent":
            tree[mount.key] = None
            continue
        tree[mount.key] = list(listing.names)
        count += len(listing.names)
    return FacetRead("present", canonical=tree, count=count)
