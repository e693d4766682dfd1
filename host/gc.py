"""`harness gc`: release what a killed orchestrator left behind, with cleanup receipts.

What is a leftover is decided in one place, host/vm/leftovers.py (by name: the trial
tag). This module only releases, each release with the reading that proves it:
a libvirt domain destroyed and then absent from libvirt, a QEMU process killed and no
longer running, a cgroup emptied and removed, a directory removed and absent.

A running trial's resources carry the same names as a dead one's; the finder skips
every tag whose lease (host/vm/lease.py) a live orchestrator holds. VMs started
outside a trial (tests, benchmarks) hold no lease: gc treats them as leftovers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Literal

from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.vm.cleanup import CleanupResult, Stopwatch
from host.vm.leftovers import LIBVIRT_LOG_DIR, Leftover, find_leftovers
from host.vm.process import process_running

KILL_DEADLINE_S = 10.0

__all__ = ["Leftover", "collect", "find_leftovers"]


def _kill(pid: int) -> CleanupResult:
    watch = Stopwatch()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return CleanupResult("qemu_process", "confirmed", "process_gone", 0)
    except OSError:
        return CleanupResult("qemu_process", "failed", "unread", 0)
    while watch.ms() < KILL_DEADLINE_S * 1000:
        if not process_running(pid):
            return CleanupResult("qemu_process", "confirmed", "process_gone", watch.ms())
        time.sleep(0.05)
    return CleanupResult("qemu_process", "failed", "still_present", watch.ms())


def _destroy_domain(name: str) -> CleanupResult:
    from host.vm.virtconn import VirtError, destroy_by_name, open_connection

    watch = Stopwatch()
    try:
        conn = open_connection()
    except VirtError:
        return CleanupResult("libvirt_domain", "failed", "unread", watch.ms())
    try:
        state = destroy_by_name(conn, name)
    finally:
        conn.close()
    if state == "absent":
        return CleanupResult("libvirt_domain", "confirmed", "domain_absent", watch.ms())
    evidence: Literal["still_present", "unread"] = (
        "still_present" if state == "present" else "unread"
    )
    return CleanupResult("libvirt_domain", "failed", evidence, watch.ms())


def _release_cgroup(name: str) -> CleanupResult:
    watch = Stopwatch()
    try:
        group = detect().open(name)
        group.kill_members()
        group.remove()
        gone = not group.exists()
    except (CgroupError, OSError):
        return CleanupResult("cgroup", "failed", "unread", watch.ms())
    if gone:
        return CleanupResult("cgroup", "confirmed", "cgroup_empty_and_removed", watch.ms())
    return CleanupResult("cgroup", "failed", "still_present", watch.ms())


def _remove_dir(path: Path) -> CleanupResult:
    watch = Stopwatch()
    shutil.rmtree(path, ignore_errors=True)
    if path.exists() or path.is_symlink():
        return CleanupResult("scratch_dir", "failed", "still_present", watch.ms())
    return CleanupResult("scratch_dir", "confirmed", "directory_absent", watch.ms())


def _remove_file(path: Path) -> CleanupResult:
    """A stale lease file or libvirt domain log: the trial's last names on disk
    (reported as part of its scratch: the record has no resource of their own)."""
    watch = Stopwatch()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if path.exists() or path.is_symlink():
        return CleanupResult("scratch_dir", "failed", "still_present", watch.ms())
    return CleanupResult("scratch_dir", "confirmed", "file_absent", watch.ms())


def release(item: Leftover) -> CleanupResult:
    if item.kind == "libvirt_domain":
        return _destroy_domain(item.name)
    if item.kind == "qemu_process":
        return _kill(int(item.name))
    if item.kind == "cgroup":
        return _release_cgroup(item.name)
    if item.kind == "trial_file":
        return _remove_file(Path(item.name))
    return _remove_dir(Path(item.name))


def collect(
    trials_root: Path, temp_root: Path | None = None, log_dir: Path = LIBVIRT_LOG_DIR
) -> list[tuple[Leftover, CleanupResult]]:
    """Release every leftover, in the finder's order (domains and processes hold the
    cgroup and the files, so they go first)."""
    found = find_leftovers(trials_root, temp_root, log_dir)
    return [(item, release(item)) for item in found]
