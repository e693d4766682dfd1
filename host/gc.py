"""`harness gc`: find what a killed orchestrator left behind, by name, and release it.

Names are the contract (host/vm/tags.py): QEMU runs with `-name guest=harness-vm-<tag>`,
its scratch directory is `harness-vm-<tag>-*`, the trial's data disk directory is
`data-<tag>`, and its cgroup is `trial-<tag>` under the harness parent. gc never
touches anything without those names, and each release yields a cleanup result with
the reading that proves it (`released_by=gc` in a receipt).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.vm.cleanup import CleanupResult

QEMU_NAME = re.compile(rb"guest=harness-vm-([0-9a-f]{8,32})")
TRIAL_DIR = re.compile(r"^(?:harness-vm-[0-9a-f]{8,32}-[A-Za-z0-9_]+|data-[0-9a-f]{8,32})$")
KILL_DEADLINE_S = 10.0


@dataclass(frozen=True)
class Leftover:
    kind: str
    """`qemu_process`, `cgroup` or `scratch_dir`."""
    name: str


def _qemu_processes() -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        match = QEMU_NAME.search(cmdline)
        if match and b"qemu-system" in cmdline.split(b"\0", 1)[0]:
            found.append((int(entry.name), match.group(1).decode()))
    return found


def find_leftovers(trials_root: Path) -> list[Leftover]:
    leftovers = [Leftover("qemu_process", str(pid)) for pid, _tag in _qemu_processes()]
    try:
        names = detect().list_names(prefix="trial-")
        for listing in names.values():
            leftovers.extend(Leftover("cgroup", name) for name in listing.names)
    except (CgroupError, OSError):
        pass  # reported by doctor; gc releases what it can read
    if trials_root.is_dir():
        leftovers.extend(
            Leftover("scratch_dir", path.name)
            for path in sorted(trials_root.iterdir())
            if TRIAL_DIR.fullmatch(path.name)
        )
    unique = {(item.kind, item.name): item for item in leftovers}
    return list(unique.values())


def _running(pid: int) -> bool:
    """Whether `pid` still runs. A zombie (Z) or dead (X) entry holds no resources
    but its pid: it waits only for a parent's (or a slow init's) reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def _kill(pid: int) -> CleanupResult:
    started = time.monotonic()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return CleanupResult("qemu_process", "confirmed", "process_gone", 0)
    except OSError:
        return CleanupResult("qemu_process", "failed", "unread", 0)
    while time.monotonic() - started < KILL_DEADLINE_S:
        if not _running(pid):
            return CleanupResult(
                "qemu_process",
                "confirmed",
                "process_gone",
                int((time.monotonic() - started) * 1000),
            )
        time.sleep(0.05)
    return CleanupResult("qemu_process", "failed", "still_present", int(KILL_DEADLINE_S * 1000))


def _release_cgroup(name: str) -> CleanupResult:
    started = time.monotonic()
    try:
        group = detect().open(name)
        group.kill_members()
        group.remove()
        gone = not group.exists()
    except (CgroupError, OSError):
        return CleanupResult("cgroup", "failed", "unread", int((time.monotonic() - started) * 1000))
    elapsed = int((time.monotonic() - started) * 1000)
    if gone:
        return CleanupResult("cgroup", "confirmed", "cgroup_empty_and_removed", elapsed)
    return CleanupResult("cgroup", "failed", "still_present", elapsed)


def _remove_dir(path: Path) -> CleanupResult:
    started = time.monotonic()
    shutil.rmtree(path, ignore_errors=True)
    elapsed = int((time.monotonic() - started) * 1000)
    if path.exists():
        return CleanupResult("scratch_dir", "failed", "still_present", elapsed)
    return CleanupResult("scratch_dir", "confirmed", "directory_absent", elapsed)


def collect(trials_root: Path) -> list[tuple[Leftover, CleanupResult]]:
    """Release every leftover: processes first (they hold the cgroup), then cgroups, dirs."""
    order = {"qemu_process": 0, "cgroup": 1, "scratch_dir": 2}
    results = []
    for item in sorted(find_leftovers(trials_root), key=lambda leftover: order[leftover.kind]):
        if item.kind == "qemu_process":
            result = _kill(int(item.name))
        elif item.kind == "cgroup":
            result = _release_cgroup(item.name)
        else:
            result = _remove_dir(trials_root / item.name)
        results.append((item, result))
    return results
