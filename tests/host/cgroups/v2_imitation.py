"""An IMITATION of the cgroup v2 file layout in a temporary directory.

This host mounts the memory controller as v1, so a real v2 memory controller cannot
be had here. The v2 implementation is therefore exercised against plain files laid
out as cgroupfs lays them out. What the imitation does NOT do: interpret writes
(a write to `cgroup.subtree_control` or `cgroup.procs` just replaces the file's
bytes), enforce limits, or kill anything. Where a test needs the kernel's side of a
protocol (pruning exited pids from `cgroup.procs`), the imitation provides a small,
explicit stand-in.
"""

import os
import shutil
import threading
from pathlib import Path

from host.cgroups.v2 import DirOps

MIB = 1 << 20


def _files(controllers: str, *, with_peak: bool, with_swap: bool) -> dict[str, str]:
    files = {
        "cgroup.controllers": controllers + "\n",
        "cgroup.subtree_control": "\n",
        "cgroup.procs": "",
        "cgroup.kill": "",
        "cgroup.events": "populated 0\nfrozen 0\n",
        "memory.max": "max\n",
        "memory.current": "0\n",
        "memory.stat": "anon 0\nfile 0\nactive_file 0\ninactive_file 0\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "cpu.max": "max 100000\n",
        "pids.max": "max\n",
    }
    if with_peak:
        files["memory.peak"] = "0\n"
    if with_swap:
        files["memory.swap.max"] = "max\n"
    return files


class ImitationV2Tree:
    """A directory tree shaped like a cgroup2 mount with memory, cpu and pids."""

    def __init__(self, root: Path, *, with_peak: bool = True, with_swap: bool = True) -> None:
        self.root = root
        self.with_peak = with_peak
        self.with_swap = with_swap
        root.mkdir(parents=True, exist_ok=True)
        self._populate(root, "cpu io memory pids")
        (root / "cgroup.subtree_control").write_text("cpu memory pids\n")

    def _populate(self, directory: Path, controllers: str) -> None:
        for name, text in _files(
            controllers, with_peak=self.with_peak, with_swap=self.with_swap
        ).items():
            (directory / name).write_text(text)

    def mkdir(self, path: Path) -> None:
        """What the kernel does on mkdir: the directory plus its interface files."""
        os.mkdir(path)
        parent_control = (path.parent / "cgroup.subtree_control").read_text().split()
        self._populate(path, " ".join(c for c in parent_control if not c.startswith("+")))

    def rmdir(self, path: Path) -> None:
        """What the kernel does on rmdir: refuse while members remain, else drop all."""
        if (path / "cgroup.procs").read_text().split():
            raise OSError(16, "Device or resource busy")
        if any(p.is_dir() for p in path.iterdir()):
            raise OSError(16, "Device or resource busy")
        shutil.rmtree(path)

    def dir_ops(self) -> DirOps:
        return DirOps(mkdir=self.mkdir, rmdir=self.rmdir)

    def make_parent(self, name: str = "harness") -> Path:
        """A harness parent with controllers enabled, as an earlier run leaves it.

        The imitation cannot turn `+memory` into `memory` in `cgroup.subtree_control`,
        so the enabled state is written here directly.
        """
        parent = self.root / name
        self.mkdir(parent)
        (parent / "cgroup.subtree_control").write_text("cpu memory pids\n")
        return parent


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class ImitationProcsPruner:
    """Stand-in for the kernel removing exited tasks from one `cgroup.procs`."""

    def __init__(self, procs: Path) -> None:
        self._procs = procs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = self._procs.read_text().split()
            kept = [p for p in pids if _alive(int(p))]
            if kept != pids:
                # Replace atomically: a reader must never see a half-written file.
                staged = self._procs.with_name(".procs.staged")
                staged.write_text("".join(f"{p}\n" for p in kept))
                os.replace(staged, self._procs)
            self._stop.wait(0.005)

    def __enter__(self) -> "ImitationProcsPruner":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
