"""The one interface both cgroup versions implement.

Callers (the trial's resource stack, `harness gc`, the host-state snapshot) program
against these protocols and never branch on the version; `detect()` chooses the
implementation by what is mounted.
"""

from typing import Protocol

from host.cgroups.categories import CgroupVersion, Controller
from host.cgroups.readings import (
    CpuQuotaApplied,
    MemoryLimitApplied,
    MemoryReadings,
    NameListing,
    PidsLimitApplied,
    Reading,
)


class Cgroup(Protocol):
    """One harness-owned cgroup (in every controller hierarchy it spans)."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> CgroupVersion: ...

    def set_memory_limit(self, limit_bytes: int) -> MemoryLimitApplied:
        """Limit memory to `limit_bytes` with no swap; read both back."""
        ...

    def set_cpu_quota(self, quota_us: int, period_us: int) -> CpuQuotaApplied:
        """Allow `quota_us` of CPU time per `period_us`; read back."""
        ...

    def set_cpu_weight_lowest(self) -> None:
        """Yield the CPU to every other cgroup that wants it (cpu.weight 1, v1 cpu.shares
        2), read back: a share, not a limit; alone on the host it may use its quota."""
        ...

    def set_cpu_weight_default(self) -> None:
        """The kernel's default share again (cpu.weight 100, v1 cpu.shares 1024), read
        back."""
        ...

    def set_pids_limit(self, max_pids: int) -> PidsLimitApplied:
        """Limit the number of tasks; read back."""
        ...

    def add_process(self, pid: int) -> None:
        """Move process `pid` (all its threads) into this cgroup."""
        ...

    def add_process_to(self, controllers: tuple[Controller, ...], pid: int) -> None:
        """Move `pid` into this cgroup in these controllers' hierarchies only.

        For a process another manager keeps in its own cgroups (libvirt's QEMU): on v1
        each controller is a separate hierarchy, so a budget libvirt cannot set (pids)
        can be ours while the rest stay libvirt's. v2 has one hierarchy for all:
        `controller_missing`."""
        ...

    def member_pids(self) -> tuple[int, ...]:
        """The processes currently in this cgroup."""
        ...

    def procs_fds_for_preexec(self) -> list[int]:
        """Open write descriptors on every `cgroup.procs`, for a child to join by."""
        ...

    def kill_members(self, deadline_s: float = 5.0) -> int:
        """SIGKILL every member and wait until the cgroup is empty."""
        ...

    def remove(self) -> None:
        """Remove the (empty) cgroup from every hierarchy and confirm it is gone."""
        ...

    def exists(self) -> bool:
        """Whether any of this cgroup's directories still exists."""
        ...

    def memory_limit(self) -> Reading: ...

    def memory_usage(self) -> Reading: ...

    def memory_peak(self) -> Reading: ...

    def oom_kills(self) -> Reading: ...

    def read_memory(self) -> MemoryReadings:
        """Limit, usage, peak, inactive file, working set, headroom and OOM kills."""
        ...


class CgroupHierarchy(Protocol):
    """The harness parent in one cgroup version's hierarchies."""

    @property
    def version(self) -> CgroupVersion: ...

    @property
    def parent(self) -> str: ...

    def create(self, name: str) -> Cgroup:
        """Create `parent/name`; `already_exists` if it is there."""
        ...

    def open(self, name: str) -> Cgroup:
        """Open an existing `parent/name`; `not_found` if it is not there."""
        ...

    def list_names(self, prefix: str = "") -> dict[str, NameListing]:
        """Names under the parent starting with `prefix`, per hierarchy key."""
        ...
