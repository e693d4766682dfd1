"""cgroup v2: one unified tree, controllers enabled per level, swap limited directly.

A child only gets a controller its parent lists in `cgroup.subtree_control`, so
`create` enables memory (required), cpu and pids (where the kernel offers them) at
the mount root and at the harness parent, reading each back. The harness parent
holds no processes itself, as v2's no-internal-processes rule requires.

No swap: `memory.swap.max` is set to 0 before `memory.max` is set, so there is no
moment when the budget exists and swap could absorb its overflow.

Directory creation and removal go through `DirOps`: on cgroupfs the kernel creates
and deletes the interface files; a plain directory tree that imitates the layout (as
the tests use on hosts without a v2 memory controller) must do so itself.
"""

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from host.cgroups.categories import CgroupVersion, Controller
from host.cgroups.errors import CgroupError
from host.cgroups.fileio import read_text, write_text, write_verified
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

_WANTED: tuple[Controller, ...] = ("memory", "cpu", "pids")


@dataclass(frozen=True)
class DirOps:
    """How cgroup directories are made and removed (the kernel's way by default)."""

    mkdir: Callable[[Path], None]
    rmdir: Callable[[Path], None]


KERNEL_DIR_OPS = DirOps(mkdir=os.mkdir, rmdir=os.rmdir)


def _tokens(path: Path) -> frozenset[str]:
    return frozenset(read_text(path).split())


def enable_controllers(directory: Path, wanted: tuple[str, ...]) -> None:
    """Make `directory`'s children get `wanted`; read `cgroup.subtree_control` back."""
    control = directory / "cgroup.subtree_control"
    missing = [c for c in wanted if c not in _tokens(control)]
    if not missing:
        return
    write_text(control, " ".join(f"+{c}" for c in missing))
    if not set(wanted) <= _tokens(control):
        raise CgroupError("readback_mismatch", interface_file=control.name)


class V2Cgroup:
    """A harness cgroup in the unified hierarchy."""

    def __init__(self, name: str, path: Path, controllers: frozenset[str], dir_ops: DirOps) -> None:
        self._name = name
        self._path = path
        self._controllers = controllers
        self._dir_ops = dir_ops

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> CgroupVersion:
        return "v2"

    def _need(self, controller: Controller) -> Path:
        if controller not in self._controllers:
            raise CgroupError("controller_missing", controller=controller)
        return self._path

    def _procs(self) -> list[tuple[Controller, Path]]:
        return [("memory", self._path / "cgroup.procs")]

    def set_memory_limit(self, limit_bytes: int) -> MemoryLimitApplied:
        validate_limit(limit_bytes)
        path = self._need("memory")
        if not (path / "memory.swap.max").exists():
            raise CgroupError("swap_accounting_missing", controller="memory")
        write_verified(path / "memory.swap.max", "0", controller="memory")
        write_verified(path / "memory.max", str(limit_bytes), controller="memory")
        return MemoryLimitApplied(limit_bytes=limit_bytes, swap_bytes=0)

    def set_cpu_quota(self, quota_us: int, period_us: int) -> CpuQuotaApplied:
        validate_cpu(quota_us, period_us)
        path = self._need("cpu")
        write_verified(path / "cpu.max", f"{quota_us} {period_us}", controller="cpu")
        return CpuQuotaApplied(quota_us=quota_us, period_us=period_us)

    def set_cpu_weight_lowest(self) -> None:
        write_verified(self._need("cpu") / "cpu.weight", "1", controller="cpu")

    def set_cpu_weight_default(self) -> None:
        write_verified(self._need("cpu") / "cpu.weight", "100", controller="cpu")

    def set_pids_limit(self, max_pids: int) -> PidsLimitApplied:
        validate_pids(max_pids)
        write_verified(self._need("pids") / "pids.max", str(max_pids), controller="pids")
        return PidsLimitApplied(max_pids=max_pids)

    def add_process(self, pid: int) -> None:
        write_text(self._path / "cgroup.procs", str(pid))
        if pid not in self.member_pids():
            raise CgroupError("not_in_cgroup")

    def add_process_to(self, controllers: tuple[Controller, ...], pid: int) -> None:
        """One hierarchy for every controller: a process cannot be ours for some only."""
        raise CgroupError("controller_missing", controller=controllers[0] if controllers else None)

    def member_pids(self) -> tuple[int, ...]:
        return member_pids(self._procs())

    def procs_fds_for_preexec(self) -> list[int]:
        try:
            return [os.open(self._path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)]
        except OSError:
            raise CgroupError("spawn_failed") from None

    def kill_members(self, deadline_s: float = 5.0) -> int:
        kill_file = self._path / "cgroup.kill"
        return kill_members(
            self._procs(),
            deadline_s=deadline_s,
            kill_file=kill_file if kill_file.exists() else None,
        )

    def remove(self) -> None:
        if not self._path.exists():
            return
        if self.member_pids():
            raise CgroupError("not_empty")
        try:
            self._dir_ops.rmdir(self._path)
        except FileNotFoundError:
            pass
        except OSError:
            raise CgroupError("remove_failed") from None
        if self.exists():
            raise CgroupError("remove_failed")

    def exists(self) -> bool:
        return self._path.exists()

    def memory_limit(self) -> Reading:
        return read_limit(self._path / "memory.max")

    def memory_usage(self) -> Reading:
        return read_int(self._path / "memory.current")

    def memory_peak(self) -> Reading:
        return read_int(self._path / "memory.peak")

    def oom_kills(self) -> Reading:
        return read_key(self._path / "memory.events", "oom_kill")

    def swap_limit(self) -> Reading:
        """v2 only: `memory.swap.max` (0 when no swap is allowed)."""
        return read_limit(self._path / "memory.swap.max")

    def read_memory(self) -> MemoryReadings:
        limit = self.memory_limit()
        usage = self.memory_usage()
        inactive = read_key(self._path / "memory.stat", "inactive_file")
        working = working_set(usage, inactive)
        return MemoryReadings(
            version="v2",
            limit=limit,
            usage=usage,
            peak=self.memory_peak(),
            inactive_file=inactive,
            working_set=working,
            headroom=headroom(limit, working),
            oom_kills=self.oom_kills(),
        )


class V2Hierarchy:
    """The harness parent in the unified hierarchy mounted at `mount_point`."""

    def __init__(
        self, mount_point: Path, parent: str = "harness", dir_ops: DirOps = KERNEL_DIR_OPS
    ) -> None:
        self._mount = mount_point
        self._parent = validate_name(parent)
        self._dir_ops = dir_ops

    @property
    def version(self) -> CgroupVersion:
        return "v2"

    @property
    def parent(self) -> str:
        return self._parent

    def _prepare_parent(self) -> tuple[str, ...]:
        offered = _tokens(self._mount / "cgroup.controllers")
        if "memory" not in offered:
            raise CgroupError("no_memory_controller")
        wanted = tuple(c for c in _WANTED if c in offered)
        enable_controllers(self._mount, wanted)
        parent = self._mount / self._parent
        if not parent.is_dir():
            try:
                self._dir_ops.mkdir(parent)
            except FileExistsError:
                pass
            except PermissionError:
                raise CgroupError("permission_denied") from None
            except OSError:
                raise CgroupError("write_rejected") from None
        enable_controllers(parent, wanted)
        return wanted

    def create(self, name: str) -> V2Cgroup:
        validate_name(name)
        self._prepare_parent()
        path = self._mount / self._parent / name
        try:
            self._dir_ops.mkdir(path)
        except FileExistsError:
            raise CgroupError("already_exists") from None
        except PermissionError:
            raise CgroupError("permission_denied") from None
        except OSError:
            raise CgroupError("write_rejected") from None
        try:
            return self._opened(name, path)
        except CgroupError:
            with contextlib.suppress(OSError):
                self._dir_ops.rmdir(path)
            raise

    def _opened(self, name: str, path: Path) -> V2Cgroup:
        controllers = _tokens(path / "cgroup.controllers")
        if "memory" not in controllers:
            raise CgroupError("controller_missing", controller="memory")
        return V2Cgroup(name, path, controllers, self._dir_ops)

    def open(self, name: str) -> V2Cgroup:
        validate_name(name)
        path = self._mount / self._parent / name
        if not path.is_dir():
            raise CgroupError("not_found")
        return self._opened(name, path)

    def list_names(self, prefix: str = "") -> dict[str, NameListing]:
        validate_prefix(prefix)
        return {"unified": list_children(self._mount, self._parent, prefix)}
