"""`harness gc`: release what a killed orchestrator left behind, with cleanup receipts.

What is a leftover is decided in one place, host/vm/leftovers.py (by name: the trial
tag). This module only releases, each release with the reading that proves it:
a libvirt domain destroyed and then absent from libvirt, a QEMU process killed and no
longer running, a cgroup emptied and removed, a directory removed and absent.

A running trial's resources carry the same names as a dead one's; the finder skips
every tag whose lease (host/vm/lease.py) a live orchestrator holds, and takes a
host-wide resource (a QEMU, a domain, a cgroup) only when its tag has a trace in the
trials root gc was given, because another root's leases cannot be read from here.
`harness gc --dry-run` lists those it leaves alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.release import (
    CleanupResult,
    Stopwatch,
    release_cgroup,
    remove_dir,
    remove_files,
    stop_process,
)
from host.vm.leftovers import LIBVIRT_LOG_DIR, Leftover, find_leftovers, find_unowned

KILL_DEADLINE_S = 10.0

__all__ = ["Leftover", "collect", "find_leftovers", "find_unowned"]


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
    try:
        group = detect().open(name)
    except (CgroupError, OSError):
        return CleanupResult("cgroup", "failed", "unread", 0)
    return release_cgroup(group)


def release(item: Leftover) -> CleanupResult:
    if item.kind == "libvirt_domain":
        return _destroy_domain(item.name)
    if item.kind == "qemu_process":
        return stop_process(int(item.name), "qemu_process", KILL_DEADLINE_S)
    if item.kind == "cgroup":
        return _release_cgroup(item.name)
    if item.kind == "trial_file":
        # A stale lease file or libvirt domain log: the trial's last names on disk
        # (reported as part of its scratch: the record has no resource of their own).
        return remove_files((Path(item.name),), "scratch_dir")
    return remove_dir(Path(item.name), "scratch_dir")


def collect(
    trials_root: Path, temp_root: Path | None = None, log_dir: Path = LIBVIRT_LOG_DIR
) -> list[tuple[Leftover, CleanupResult]]:
    """Release every leftover, in the finder's order (domains and processes hold the
    cgroup and the files, so they go first). A tag whose release failed keeps its lease
    file: it is the tag's trace in this root, without which a later gc could not take
    the host-wide resources still held under that tag (host/vm/leftovers.py)."""
    found = find_leftovers(trials_root, temp_root, log_dir)
    failed: set[str] = set()
    done: list[tuple[Leftover, CleanupResult]] = []
    for item in found:
        if item.kind == "trial_file" and item.tag in failed:
            continue
        result = release(item)
        if result.status == "failed":
            failed.add(item.tag)
        done.append((item, result))
    return done
