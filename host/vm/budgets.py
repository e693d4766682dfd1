"""The budgets in effect for a process, read from the kernel where it actually runs.

Why: the two backends put QEMU in different cgroups (the trial's own for qemu,
libvirt's `machine/...` for libvirt, and on cgroup v1 a different one per
controller). "The budget is applied" is only evidence when it is read where the
process is, not where we meant to put it: /proc/PID/cgroup names the process's cgroup
in each hierarchy (a v1 controller's, or the v2 unified path) and the limit files
are read there. CPU and pids limits are hierarchical: an ancestor's limit binds too
(libvirt sets the domain-wide CPU quota on the domain's cgroup, and QEMU's main
thread lives in its `emulator` child), so those are the tightest limit found from
the process's cgroup up to the hierarchy's root. Three answers (docs/engineering.md §2): a
limit, `None` for unlimited, or `BudgetUnread`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from host.cgroups.errors import CgroupError
from host.cgroups.memory import read_int, read_key
from host.cgroups.mounts import CgroupMount, read_mounts
from host.cgroups.readings import Reading
from receipts.kernelfacts import CGROUP_UNLIMITED


class BudgetUnread(Exception):
    """The process's cgroup or one of its limit files could not be read."""


def cgroup_dirs(cgroup_text: str, mounts: Iterable[CgroupMount]) -> dict[str, tuple[Path, Path]]:
    """Controller (or ``unified``) -> (the process's cgroup directory, the mount root),
    from the text of /proc/PID/cgroup."""
    found: dict[str, tuple[Path, Path]] = {}
    mounts = tuple(mounts)
    for line in cgroup_text.splitlines():
        try:
            _, controllers, path = line.split(":", 2)
        except ValueError:
            raise BudgetUnread from None
        for mount in mounts:
            directory = mount.mount_point / path.lstrip("/")
            if not controllers and mount.version == "v2":
                found["unified"] = (directory, mount.mount_point)
            elif controllers and mount.version == "v1":
                named = set(controllers.split(","))
                for controller in named & set(mount.controllers):
                    found[controller] = (directory, mount.mount_point)
    return found


def _dirs_of(pid: int) -> dict[str, tuple[Path, Path]]:
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
        mounts = read_mounts()
    except (OSError, CgroupError):
        raise BudgetUnread from None
    return cgroup_dirs(text, mounts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError:
        raise BudgetUnread from None


def _ancestry(directory: Path, root: Path) -> Iterator[Path]:
    """The directory, then each parent up to and including the hierarchy's root."""
    current = directory
    while True:
        yield current
        if current == root or root not in current.parents:
            return
        current = current.parent


def _where(dirs: dict[str, tuple[Path, Path]], v1: str, v1_file: str) -> tuple[Path, Path, bool]:
    """(cgroup dir, root, is_v1) of the hierarchy holding the *v1* controller's file,
    else the unified one."""
    if v1 in dirs and (dirs[v1][0] / v1_file).is_file():
        return (*dirs[v1], True)
    if "unified" in dirs:
        return (*dirs["unified"], False)
    raise BudgetUnread


def memory_dir_of(pid: int) -> Path:
    """The directory of the cgroup `pid`'s memory is charged to."""
    directory, _root, _v1 = _where(_dirs_of(pid), "memory", "memory.limit_in_bytes")
    return directory


def memory_limit_of(pid: int) -> int | None:
    """Bytes the kernel lets `pid`'s memory cgroup use; None when unlimited."""
    directory, _root, v1 = _where(_dirs_of(pid), "memory", "memory.limit_in_bytes")
    text = _read(directory / ("memory.limit_in_bytes" if v1 else "memory.max"))
    if text == "max":
        return None
    if not text.isdigit():
        raise BudgetUnread
    value = int(text)
    return None if value >= CGROUP_UNLIMITED else value


def _cpu_millicores(directory: Path, v1: bool) -> int | None:
    if v1:
        if not (directory / "cpu.cfs_quota_us").is_file():
            return None  # v1 root of a co-mounted hierarchy may lack it: no limit there
        quota, period = (
            _read(directory / "cpu.cfs_quota_us"),
            _read(directory / "cpu.cfs_period_us"),
        )
    else:
        if not (directory / "cpu.max").is_file():
            return None  # the v2 root has no cpu.max
        fields = _read(directory / "cpu.max").split()
        if len(fields) != 2:
            raise BudgetUnread
        quota, period = fields
    if quota in ("-1", "max"):
        return None
    if not quota.isdigit() or not period.isdigit() or int(period) == 0:
        raise BudgetUnread
    return int(quota) * 1000 // int(period)


def tightest_cpu_millicores(directory: Path, root: Path, v1: bool) -> int | None:
    """The tightest CPU bandwidth limit over *directory* and its ancestors up to
    *root*, in millicores (1000 = one CPU); None when none is set."""
    limits = [m for d in _ancestry(directory, root) if (m := _cpu_millicores(d, v1)) is not None]
    return min(limits, default=None)


def cpu_limit_of(pid: int) -> int | None:
    """:func:`tightest_cpu_millicores` for `pid`'s cpu cgroup."""
    return tightest_cpu_millicores(*_where(_dirs_of(pid), "cpu", "cpu.cfs_quota_us"))


def pids_limit_of(pid: int) -> int | None:
    """:func:`tightest_pids_max` for `pid`'s pids cgroup."""
    directory, root, _v1 = _where(_dirs_of(pid), "pids", "pids.max")
    return tightest_pids_max(directory, root)


def tightest_pids_max(directory: Path, root: Path) -> int | None:
    """The tightest pids.max over *directory* and its ancestors up to *root*."""
    limits: list[int] = []
    for d in _ancestry(directory, root):
        if not (d / "pids.max").is_file():
            continue  # the hierarchy's root has no pids.max
        text = _read(d / "pids.max")
        if text == "max":
            continue
        if not text.isdigit():
            raise BudgetUnread
        limits.append(int(text))
    return min(limits, default=None)


def swap_limit_of(pid: int) -> int | None:
    """Swap the kernel lets `pid`'s memory cgroup use, in bytes; None when unlimited.

    v1 limits memory+swap (``memory.memsw.limit_in_bytes``): swap is its excess over
    the memory limit. v2 limits swap itself (``memory.swap.max``)."""
    directory, _root, v1 = _where(_dirs_of(pid), "memory", "memory.limit_in_bytes")
    if v1:
        memory, both = memory_limit_of(pid), _read(directory / "memory.memsw.limit_in_bytes")
        if not both.isdigit():
            raise BudgetUnread
        if memory is None or int(both) >= CGROUP_UNLIMITED:
            return None
        return int(both) - memory
    text = _read(directory / "memory.swap.max")
    if text == "max":
        return None
    if not text.isdigit():
        raise BudgetUnread
    return int(text)


def memory_record_readings(directory: Path) -> tuple[Reading, Reading]:
    """(peak bytes, OOM kills) of the memory cgroup at *directory*, each three-valued."""
    if (directory / "memory.max_usage_in_bytes").exists():  # v1
        return (
            read_int(directory / "memory.max_usage_in_bytes"),
            read_key(directory / "memory.oom_control", "oom_kill"),
        )
    return read_int(directory / "memory.peak"), read_key(directory / "memory.events", "oom_kill")
