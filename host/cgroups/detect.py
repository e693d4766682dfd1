"""Pick the cgroup implementation by what is mounted.

A controller is bound to exactly one version at a time: if the memory controller is
mounted as v1 (the hybrid layout of this project's reference machine, where cgroup2
is mounted with no controllers), v2 cannot have it, so v1 is checked first. Otherwise
a cgroup2 mount whose root offers `memory` is used. Nothing else is accepted: a trial
without a memory budget is refused with `no_memory_controller`.
"""

from pathlib import Path

from host.cgroups.categories import Controller
from host.cgroups.errors import CgroupError
from host.cgroups.fileio import read_text
from host.cgroups.interface import CgroupHierarchy
from host.cgroups.mounts import MOUNTINFO, CgroupMount, read_mounts
from host.cgroups.v1 import V1Hierarchy
from host.cgroups.v2 import V2Hierarchy

_V1_CONTROLLERS: tuple[Controller, ...] = ("memory", "cpu", "pids")


def choose(mounts: tuple[CgroupMount, ...], parent: str = "harness") -> CgroupHierarchy:
    """The hierarchy to use given the cgroup mounts."""
    v1: dict[Controller, Path] = {}
    for mount in mounts:
        if mount.version != "v1":
            continue
        for controller in _V1_CONTROLLERS:
            if controller in mount.controllers:
                v1.setdefault(controller, mount.mount_point)
    if "memory" in v1:
        return V1Hierarchy(v1, parent)
    for mount in mounts:
        if mount.version != "v2":
            continue
        if "memory" in read_text(mount.mount_point / "cgroup.controllers").split():
            return V2Hierarchy(mount.mount_point, parent)
    raise CgroupError("no_memory_controller")


def detect(mountinfo: Path = MOUNTINFO, parent: str = "harness") -> CgroupHierarchy:
    """Read the mount table and return the hierarchy the harness should use."""
    return choose(read_mounts(mountinfo), parent)
