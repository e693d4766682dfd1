"""Fixtures for VM tests: the session's guest image, real cgroups, short scratch roots.

Every cgroup is created under the harness parent with a per-session prefix and
removed (members killed first) at teardown. Scratch roots are short directories in
/tmp (AF_UNIX socket paths are limited to 108 bytes) and must be empty at the end.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from host.cgroups import Cgroup, CgroupError, detect
from host.image import GuestImage
from host.vm.leftovers import find_processes
from tests.host.image.support import session_image

QEMU_CGROUP_LIMIT = 3 << 30
"""1 GiB guest + QEMU's own memory (TCG translation cache) with room to spare."""


@pytest.fixture(scope="session")
def guest_image() -> GuestImage:
    return session_image()


@pytest.fixture
def make_vm_cgroup() -> Iterator[Callable[[], Cgroup]]:
    hierarchy = detect()
    prefix = f"hvmt{uuid.uuid4().hex[:8]}-"
    made: list[Cgroup] = []

    def make() -> Cgroup:
        cgroup = hierarchy.create(f"{prefix}{len(made)}")
        made.append(cgroup)
        cgroup.set_memory_limit(QEMU_CGROUP_LIMIT)
        return cgroup

    yield make
    failures: list[CgroupError] = []
    for cgroup in made:
        try:
            cgroup.kill_members(deadline_s=5.0)
            cgroup.remove()
        except CgroupError as err:
            failures.append(err)
    if failures:
        raise failures[0]


@pytest.fixture
def vm_cgroup(make_vm_cgroup: Callable[[], Cgroup]) -> Cgroup:
    return make_vm_cgroup()


@pytest.fixture
def scratch_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="hvt-", dir="/tmp"))
    yield root
    leftovers = sorted(p.name for p in root.iterdir())
    shutil.rmtree(root, ignore_errors=True)
    assert leftovers == [], "a VM left files in its scratch root"


def tag_processes(tag: str) -> list[int]:
    """Live processes whose command line names this trial tag (what gc would find)."""
    return [p.pid for p in find_processes() if p.tag == tag]
