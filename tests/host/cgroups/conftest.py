"""Fixtures for tests that create real cgroups on this host.

Every cgroup a test makes carries a per-session unique name prefix; teardown kills
members and removes every cgroup with that prefix (found by listing, so one a test
forgot to register is removed too), then the harness parent if this session made it
and it is empty.
"""

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from host.cgroups import Cgroup, CgroupError, CgroupHierarchy, detect
from host.cgroups.mounts import read_mounts


@pytest.fixture(scope="session")
def cg_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}-"


def _parent_dirs(hierarchy: CgroupHierarchy) -> list[Path]:
    wanted = {"memory", "cpu", "pids"}
    dirs = []
    for mount in read_mounts():
        if mount.version == "v1" and mount.controllers & wanted:
            dirs.append(mount.mount_point / hierarchy.parent)
        if mount.version == hierarchy.version == "v2":
            dirs.append(mount.mount_point / hierarchy.parent)
    return dirs


@pytest.fixture
def real_hierarchy(cg_prefix: str) -> Iterator[CgroupHierarchy]:
    hierarchy = detect()
    parents_before = {p for p in _parent_dirs(hierarchy) if p.is_dir()}
    yield hierarchy
    leftovers = {n for lst in hierarchy.list_names(cg_prefix).values() for n in lst.names}
    failures: list[CgroupError] = []
    for name in sorted(leftovers):
        try:
            cg = hierarchy.open(name)
            cg.kill_members(deadline_s=5.0)
            cg.remove()
        except CgroupError as err:  # keep cleaning the others, then report
            failures.append(err)
    for parent in _parent_dirs(hierarchy):
        if parent not in parents_before and parent.is_dir():
            with contextlib.suppress(OSError):
                os.rmdir(parent)
    if failures:
        raise failures[0]


@pytest.fixture
def make_cgroup(real_hierarchy: CgroupHierarchy, cg_prefix: str) -> Callable[[str], Cgroup]:
    def make(suffix: str) -> Cgroup:
        return real_hierarchy.create(cg_prefix + suffix)

    return make
