"""The cgroups facet against real cgroups on this host."""

import contextlib
import os
import uuid
from pathlib import Path

import pytest

from host.cgroups import detect
from host.cgroups.mounts import read_mounts
from host.hoststate import Sources, compare, take_snapshot


@pytest.mark.integration
def test_new_harness_cgroup_is_a_change(sources: Sources) -> None:
    hierarchy = detect()
    parents = [m.mount_point / hierarchy.parent for m in read_mounts()]
    existed = {p for p in parents if p.is_dir()}
    before = take_snapshot(sources)
    cg = hierarchy.create(f"t{uuid.uuid4().hex[:10]}-hoststate")
    try:
        during = take_snapshot(sources)
        assert compare(before, during).outcome("cgroups") == "changed"
        assert during.facet("cgroups").count >= before.facet("cgroups").count + 1
    finally:
        cg.remove()
        for parent in parents:
            if parent not in existed and parent.is_dir():
                with contextlib.suppress(OSError):
                    os.rmdir(parent)
    assert compare(before, take_snapshot(sources)).outcome("cgroups") == "unchanged"


def test_unlistable_hierarchy_is_unread(tmp_path: Path, sources: Sources) -> None:
    # A mount table naming a cgroup2 mount point that cannot be listed.
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"29 23 0:26 / {tmp_path / 'missing'} rw - cgroup2 cgroup2 rw\n")
    snap = take_snapshot(
        Sources(mountinfo=mountinfo, firewall_search_path=sources.firewall_search_path)
    )
    assert snap.facet("cgroups").state == "unread"
    assert compare(snap, snap).outcome("cgroups") == "unread"


def test_an_absent_parent_reads_as_an_empty_one(tmp_path: Path) -> None:
    """The harness parent is infrastructure the first trial on a host creates and leaves:
    absent before and empty after is no change. A cgroup under it still is."""
    root = tmp_path / "imitation-cgroup2"
    root.mkdir()
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"29 23 0:26 / {root} rw - cgroup2 cgroup2 rw\n")
    s = Sources(mountinfo=mountinfo)
    no_parent = take_snapshot(s)
    assert no_parent.facet("cgroups").state == "present"
    (root / "harness").mkdir()
    empty_parent = take_snapshot(s)
    assert compare(no_parent, empty_parent).outcome("cgroups") == "unchanged"
    (root / "harness" / "left-behind").mkdir()
    assert compare(no_parent, take_snapshot(s)).outcome("cgroups") == "changed"
    assert compare(empty_parent, take_snapshot(s)).outcome("cgroups") == "changed"
