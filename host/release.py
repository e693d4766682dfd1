"""Releasing what a trial owns: one result per resource, with the reading that proves it.

Why one module: the trial (harness/trial/vmstage.py, hostworker.py), the guest VM
(host/vm/guest.py) and `harness gc` (host/gc.py) release the same kinds of things
(cgroups, directories, files, processes). Three copies had drifted: the same cgroup
error read `unread` in one and `still_present` in another. Every release here never
raises (teardown goes on), and says `failed` with `unread` when it could not read
whether the thing is gone (docs/engineering.md §2).

Why a result type of our own: the release code runs before the receipt's index is
known, and the same results are shown in tests and benchmarks. `to_record()` turns
one into `receipts.records.cleanup.CleanupRecord`, so the fields are the record's
own types (`Resource`, `CleanupStatus`, `Evidence`) and cannot drift from it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.cgroups import Cgroup
from host.cgroups.errors import CgroupError
from host.procfs import process_running
from receipts.records.cleanup import CleanupRecord, CleanupStatus, Evidence, Resource


@dataclass(frozen=True)
class CleanupResult:
    resource: Resource
    status: CleanupStatus
    evidence: Evidence
    duration_ms: int

    @property
    def confirmed(self) -> bool:
        return self.status == "confirmed"

    def to_record(self, index: int, released_by: Literal["trial", "gc"] = "trial") -> CleanupRecord:
        return CleanupRecord(
            index=index,
            resource=self.resource,
            status=self.status,
            evidence=self.evidence,
            released_by=released_by,
            duration_ms=self.duration_ms,
        )


def not_acquired(resource: Resource) -> CleanupResult:
    return CleanupResult(resource, "not_acquired", "nothing_to_release", 0)


class Stopwatch:
    """Milliseconds since construction (monotonic)."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)


def release_cgroup(cgroup: Cgroup) -> CleanupResult:
    """Kill what is left in the cgroup, remove it, and read that it is gone. An error on
    the way is `unread`: whether it is still there was not read."""
    watch = Stopwatch()
    try:
        cgroup.kill_members()
        cgroup.remove()
        gone = not cgroup.exists()
    except (CgroupError, OSError):
        return CleanupResult("cgroup", "failed", "unread", watch.ms())
    if gone:
        return CleanupResult("cgroup", "confirmed", "cgroup_empty_and_removed", watch.ms())
    return CleanupResult("cgroup", "failed", "still_present", watch.ms())


def _absent(paths: tuple[Path, ...]) -> bool | None:
    """Whether none of `paths` exists (a dangling link counts as present); None: unread."""
    try:
        return not any(p.exists() or p.is_symlink() for p in paths)
    except OSError:
        return None


def _proved(resource: Resource, absent: bool | None, evidence: Evidence, ms: int) -> CleanupResult:
    if absent is None:
        return CleanupResult(resource, "failed", "unread", ms)
    if absent:
        return CleanupResult(resource, "confirmed", evidence, ms)
    return CleanupResult(resource, "failed", "still_present", ms)


def remove_dir(path: Path, resource: Resource) -> CleanupResult:
    """Remove a directory tree and read that it is absent."""
    watch = Stopwatch()
    shutil.rmtree(path, ignore_errors=True)
    return _proved(resource, _absent((path,)), "directory_absent", watch.ms())


def remove_files(paths: tuple[Path, ...], resource: Resource) -> CleanupResult:
    """Unlink each file, then read that each is absent."""
    watch = Stopwatch()
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
    return _proved(resource, _absent(paths), "file_absent", watch.ms())


def stop_process(pid: int, resource: Resource, deadline_s: float) -> CleanupResult:
    """SIGKILL a process that is not our child (gc's leftovers) and wait, up to
    `deadline_s`, until /proc says it no longer runs."""
    watch = Stopwatch()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return CleanupResult(resource, "confirmed", "process_gone", watch.ms())
    except OSError:
        return CleanupResult(resource, "failed", "unread", watch.ms())
    while watch.ms() < deadline_s * 1000:
        if not process_running(pid):
            return CleanupResult(resource, "confirmed", "process_gone", watch.ms())
        time.sleep(0.05)
    return CleanupResult(resource, "failed", "still_present", watch.ms())
