"""cgroup v1: one directory per controller hierarchy, swap limited through memsw.

v1 has no single tree: the memory, cpu and pids controllers are separate mounts,
so one harness cgroup is a directory in each mounted one and every member is written
into each. Memory is mandatory (a trial without a memory budget is refused); cpu and
pids are applied where mounted and `controller_missing` when asked for otherwise.

No swap: `memory.memsw.limit_in_bytes` (memory+swap) is set equal to the memory
limit. The kernel keeps memsw ≥ memory at every instant, so lowering writes memory
first and raising writes memsw first; the wrong order is refused with EINVAL.
"""

import contextlib
import errno
import os
from pathlib import Path

from host.cgroups.categories import CgroupVersion, Controller
from host.cgroups.errors import CgroupError
from host.cgroups.fileio import parse_int, read_text, write_text, write_verified
from host.cgroups.listing import list_children
from host.cgroups.members import kill_members, member_pids
from host.cgroups.memory import (
    headroom,
    read_int,
    read_key,
    read_limit,
    working_set,
)
from host.cgroups.names import validate_name, validate_prefix
from host.cgroups.readings import (
    CpuQuotaApplied,
    MemoryLimitApplied,
    MemoryReadings,
    NameListing,
    PidsLimitApplied,
    Reading,
)
from host.cgroups.validate import validate_cpu, validate_limit, validate_pids

_CONTROLLER_ORDER: tuple[Controller, ...] = ("memory", "cpu", "pids")


def memory_write_order(current_limit: int, target: int) -> tuple[str, str]:
    """Which of the two files to write first so memsw ≥ memory holds throughout."""
    if target <= current_limit:
        return ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")
    return ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")


class V1Cgroup:
    """A harness cgroup spanning the mounted v1 controller hierarchies."""

    def __init__(self, name: str, dirs: dict[Controller, Path]) -> None:
        if "memory" not in dirs:
            raise CgroupError("no_memory_controller")
        self._name = name
        self._dirs = dict(dirs)

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> CgroupVersion:
        return "v1"

    def _dir(self, controller: Controller) -> Path:
        if controller not in self._dirs:
            raise CgroupError("controller_missing", controller=controller)
        return self._dirs[controller]

    def _procs_files(self) -> list[tuple[Controller, Path]]:
        return [
            (c, self._dirs[c] / "cgroup.procs")
            for c in _CONTROLLER_ORDER
            if c in self._dirs and self._dirs[c].is_dir()
        ]

    def set_memory_limit(self, limit_bytes: int) -> MemoryLimitApplied:
        validate_limit(limit_bytes)
        mem = self._dir("memory")
        if not (mem / "memory.memsw.limit_in_bytes").exists():
            raise CgroupError("swap_accounting_missing", controller="memory")
        current = parse_int(
            read_text(mem / "memory.limit_in_bytes", controller="memory"),
            controller="memory",
            name="memory.limit_in_bytes",
        )
        for file in memory_write_order(current, limit_bytes):
            write_verified(mem / file, str(limit_bytes), controller="memory")
        return MemoryLimitApplied(limit_bytes=limit_bytes, swap_bytes=0)

    def set_cpu_quota(self, quota_us: int, period_us: int) -> CpuQuotaApplied:
        validate_cpu(quota_us, period_us)
        cpu = self._dir("cpu")
        write_verified(cpu / "cpu.cfs_period_us", str(period_us), controller="cpu")
        write_verified(cpu / "cpu.cfs_quota_us", str(quota_us), controller="cpu")
        return CpuQuotaApplied(quota_us=quota_us, period_us=period_us)

    def set_cpu_weight_lowest(self) -> None:
        write_verified(self._dir("cpu") / "cpu.shares", "2", controller="cpu")

    def set_cpu_weight_default(self) -> None:
        write_verified(self._dir("cpu") / "cpu.shares", "1024", controller="cpu")

    def set_pids_limit(self, max_pids: int) -> PidsLimitApplied:
        validate_pids(max_pids)
        write_verified(self._dir("pids") / "pids.max", str(max_pids), controller="pids")
        return PidsLimitApplied(max_pids=max_pids)

    def add_process(self, pid: int) -> None:
        for controller, path in self._procs_files():
            write_text(path, str(pid), controller=controller)
        for controller, path in self._procs_files():
            if pid not in member_pids([(controller, path)]):
                raise CgroupError("not_in_cgroup", controller=controller)

    def add_process_to(self, controllers: tuple[Controller, ...], pid: int) -> None:
        files = [(c, self._dir(c) / "cgroup.procs") for c in controllers]
        for controller, path in files:
            write_text(path, str(pid), controller=controller)
        for controller, path in files:
            if pid not in member_pids([(controller, path)]):
                raise CgroupError("not_in_cgroup", controller=controller)

    def member_pids(self) -> tuple[int, ...]:
        return member_pids(self._procs_files())

    def procs_fds_for_preexec(self) -> list[int]:
        fds: list[int] = []
        try:
            for _controller, path in self._procs_files():
                fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise CgroupError("spawn_failed") from None
        return fds

    def kill_members(self, deadline_s: float = 5.0) -> int:
        return kill_members(self._procs_files(), deadline_s=deadline_s)

    def remove(self) -> None:
        present = [(c, d) for c, d in self._dirs.items() if d.exists()]
        if member_pids([(c, d / "cgroup.procs") for c, d in present]):
            raise CgroupError("not_empty")
        for controller, path in present:
            try:
                os.rmdir(path)
            except FileNotFoundError:
                continue
            except OSError as err:
                if err.errno == errno.EBUSY:
                    raise CgroupError("not_empty", controller=controller) from None
                raise CgroupError("remove_failed", controller=controller) from None
        if self.exists():
            raise CgroupError("remove_failed")

    def exists(self) -> bool:
        return any(d.exists() for d in self._dirs.values())

    def memory_limit(self) -> Reading:
        return read_limit(self._dirs["memory"] / "memory.limit_in_bytes")

    def memory_usage(self) -> Reading:
        return read_int(self._dirs["memory"] / "memory.usage_in_bytes")

    def memory_peak(self) -> Reading:
        return read_int(self._dirs["memory"] / "memory.max_usage_in_bytes")

    def oom_kills(self) -> Reading:
        return read_key(self._dirs["memory"] / "memory.oom_control", "oom_kill")

    def memsw_limit(self) -> Reading:
        """v1 only: the memory+swap limit (equal to the memory limit when no swap)."""
        return read_limit(self._dirs["memory"] / "memory.memsw.limit_in_bytes")

    def read_memory(self) -> MemoryReadings:
        mem = self._dirs["memory"]
        limit = self.memory_limit()
        usage = self.memory_usage()
        inactive = read_key(mem / "memory.stat", "total_inactive_file")
        working = working_set(usage, inactive)
        return MemoryReadings(
            version="v1",
            limit=limit,
            usage=usage,
            peak=self.memory_peak(),
            inactive_file=inactive,
            working_set=working,
            headroom=headroom(limit, working),
            oom_kills=self.oom_kills(),
        )


class V1Hierarchy:
    """The harness parent directory in each mounted v1 controller hierarchy."""

    def __init__(self, mounts: dict[Controller, Path], parent: str = "harness") -> None:
        if "memory" not in mounts:
            raise CgroupError("no_memory_controller")
        self._mounts = dict(mounts)
        self._parent = validate_name(parent)

    @property
    def version(self) -> CgroupVersion:
        return "v1"

    @property
    def parent(self) -> str:
        return self._parent

    def _dirs(self, name: str) -> dict[Controller, Path]:
        return {c: m / self._parent / name for c, m in self._mounts.items()}

    def create(self, name: str) -> V1Cgroup:
        validate_name(name)
        made: list[Path] = []
        try:
            for controller in _CONTROLLER_ORDER:
                if controller not in self._mounts:
                    continue
                parent = self._mounts[controller] / self._parent
                target = parent / name
                try:
                    parent.mkdir(exist_ok=True)
                    target.mkdir()
                except FileExistsError:
                    raise CgroupError("already_exists", controller=controller) from None
                except PermissionError:
                    raise CgroupError("permission_denied", controller=controller) from None
                except OSError:
                    raise CgroupError("write_rejected", controller=controller) from None
                made.append(target)
        except CgroupError:
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            raise
        return V1Cgroup(name, self._dirs(name))

    def open(self, name: str) -> V1Cgroup:
        validate_name(name)
        dirs = self._dirs(name)
        # Any one directory is enough: an orchestrator killed halfway through `remove`
        # leaves some controllers' directories, and `harness gc` must still open them.
        if not any(d.is_dir() for d in dirs.values()):
            raise CgroupError("not_found")
        return V1Cgroup(name, dirs)

    def list_names(self, prefix: str = "") -> dict[str, NameListing]:
        validate_prefix(prefix)
        return {
            controller: list_children(mount, self._parent, prefix)
            for controller, mount in self._mounts.items()
        }
