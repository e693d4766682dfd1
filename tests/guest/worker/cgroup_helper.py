"""A throwaway memory cgroup for tests: v1 (this host) or v2, cleaned up on exit.

Processes are moved in by pid; on exit any still inside are moved back to the test's
own cgroup before the directory is removed (`cgroup.procs` must be empty to rmdir).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    version: int
    home: Path

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def procs(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]


def _own_cgroup(version: int) -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if version == 1 and "memory" in controllers.split(","):
            return V1_ROOT / path.lstrip("/")
        if version == 2 and hierarchy == "0":
            return V2_ROOT / path.lstrip("/")
    raise RuntimeError("no memory cgroup for this process")


@contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[MemoryCgroup]:
    """A new cgroup with a no-swap memory limit, read back after writing."""
    name = f"harness-test-worker-{os.getpid()}-{time.monotonic_ns()}"
    if (V1_ROOT / "memory.limit_in_bytes").exists():
        group = MemoryCgroup(V1_ROOT / name, 1, _own_cgroup(1))
        group.path.mkdir()
        (group.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        memsw = group.path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(limit_bytes))
        applied = int((group.path / "memory.limit_in_bytes").read_text())
    else:
        group = MemoryCgroup(V2_ROOT / name, 2, _own_cgroup(2))
        group.path.mkdir()
        (group.path / "memory.max").write_text(str(limit_bytes))
        (group.path / "memory.swap.max").write_text("0")
        applied = int((group.path / "memory.max").read_text())
    try:
        assert abs(applied - limit_bytes) < 1 << 16, "limit not applied"
        yield group
    finally:
        for pid in group.procs():
            with contextlib.suppress(OSError):  # it exited meanwhile
                (group.home / "cgroup.procs").write_text(str(pid))
        for _ in range(100):
            try:
                group.path.rmdir()
                break
            except OSError:
                time.sleep(0.05)
        assert not group.path.exists(), "test cgroup left behind"
