"""cgroup v1 and v2 behind one interface: create, budget, read back, observe, kill, remove.

Use `detect()` to get the `CgroupHierarchy` for this host, `create(name)` for a
harness cgroup, then the budget setters (each reads its value back), the three-valued
readings, `spawn_in_cgroup`, `kill_members` and `remove`. Failures are `CgroupError`
with a closed `CgroupFailure` category.
"""

from host.cgroups.categories import CgroupFailure, CgroupVersion, Controller, ProbeState
from host.cgroups.detect import choose, detect
from host.cgroups.errors import CgroupError
from host.cgroups.interface import Cgroup, CgroupHierarchy
from host.cgroups.readings import (
    CpuQuotaApplied,
    MemoryLimitApplied,
    MemoryReadings,
    NameListing,
    PidsLimitApplied,
    Reading,
)
from host.cgroups.spawn import join_preexec, spawn_in_cgroup

__all__ = [
    "Cgroup",
    "CgroupError",
    "CgroupFailure",
    "CgroupHierarchy",
    "CgroupVersion",
    "Controller",
    "CpuQuotaApplied",
    "MemoryLimitApplied",
    "MemoryReadings",
    "NameListing",
    "PidsLimitApplied",
    "ProbeState",
    "Reading",
    "choose",
    "detect",
    "join_preexec",
    "spawn_in_cgroup",
]
