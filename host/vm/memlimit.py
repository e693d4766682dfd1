"""The memory limit of the cgroup a process actually runs in, read from the kernel.

Why: the two backends put QEMU in different cgroups (the trial's own for qemu,
libvirt's `machine/...` for libvirt). "The budget is applied" is only evidence when
it is read where the process is, not where we meant to put it: /proc/PID/cgroup
names the memory cgroup (v1 `memory` controller, or the v2 unified path) and its
limit file is read back. Three answers (STANDARDS.md §2): a limit, `None` for
unlimited (`max` or the v1 page-counter ceiling), or `MemLimitUnread`.
"""

from __future__ import annotations

from pathlib import Path

from host.cgroups.errors import CgroupError
from host.cgroups.mounts import read_mounts

V1_UNLIMITED_FLOOR = 1 << 62
"""v1 reports "no limit" as PAGE_COUNTER_MAX rounded to pages (~9.2e18)."""


class MemLimitUnread(Exception):
    """The process's memory cgroup or its limit could not be read."""


def _cgroup_dir(pid: int) -> Path:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8").splitlines()
        mounts = read_mounts()
    except (OSError, CgroupError):
        raise MemLimitUnread from None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for mount in mounts:
            v1_memory = controllers and "memory" in controllers.split(",")
            v1_match = v1_memory and mount.version == "v1" and "memory" in mount.controllers
            v2_match = not controllers and mount.version == "v2"
            if v1_match or v2_match:
                candidate = mount.mount_point / path.lstrip("/")
                limit = "memory.limit_in_bytes" if v1_match else "memory.max"
                if (candidate / limit).is_file():
                    return candidate
    raise MemLimitUnread


def memory_limit_of(pid: int) -> int | None:
    """Bytes the kernel lets `pid`'s memory cgroup use; None when unlimited."""
    directory = _cgroup_dir(pid)
    for name in ("memory.limit_in_bytes", "memory.max"):
        path = directory / name
        if path.is_file():
            try:
                text = path.read_text(encoding="ascii").strip()
            except OSError:
                raise MemLimitUnread from None
            if text == "max":
                return None
            if not text.isdigit():
                raise MemLimitUnread
            value = int(text)
            return None if value >= V1_UNLIMITED_FLOOR else value
    raise MemLimitUnread
