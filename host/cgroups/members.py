"""Killing every member of a cgroup and proving the cgroup is empty.

Membership is what `cgroup.procs` says, not a process tree: helpers that daemonise
(QEMU's guestfwd socat, see FIELD-NOTES.md) leave the tree but stay in the cgroup.
Each pid is pinned with a pidfd and confirmed to still be listed before it is
signalled, so a pid the kernel recycled for an unrelated process is never killed.
The loop repeats until every `cgroup.procs` reads empty, which also catches members
forked while the previous round was being killed; a deadline bounds it.
"""

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from host.cgroups.categories import Controller
from host.cgroups.errors import CgroupError
from host.cgroups.fileio import read_pids, write_text


def member_pids(procs_files: Sequence[tuple[Controller, Path]]) -> tuple[int, ...]:
    """Union of the process ids listed in each controller's `cgroup.procs`."""
    pids: set[int] = set()
    for controller, path in procs_files:
        pids.update(read_pids(path, controller=controller))
    return tuple(sorted(pids))


def _signal_listed(procs_files: Sequence[tuple[Controller, Path]], pids: Sequence[int]) -> None:
    pinned: dict[int, int] = {}
    try:
        for pid in pids:
            try:
                pinned[pid] = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
        still = set(member_pids(procs_files))
        for pid, fd in pinned.items():
            if pid not in still:
                continue
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                continue
    finally:
        for fd in pinned.values():
            os.close(fd)


def kill_members(
    procs_files: Sequence[tuple[Controller, Path]],
    *,
    deadline_s: float,
    kill_file: Path | None = None,
    poll_s: float = 0.01,
) -> int:
    """SIGKILL every member until all `cgroup.procs` are empty; return pids signalled.

    `kill_file` is v2's `cgroup.kill` when the kernel offers it (atomic against
    forks); the per-pid loop runs in any case. Raises `members_remain` when the
    deadline passes with members left.
    """
    end = time.monotonic() + deadline_s
    signalled: set[int] = set()
    kill_written = False
    while True:
        pids = member_pids(procs_files)
        if not pids:
            return len(signalled)
        if time.monotonic() >= end:
            raise CgroupError("members_remain")
        if kill_file is not None and not kill_written:
            write_text(kill_file, "1")
            kill_written = True
        _signal_listed(procs_files, pids)
        signalled.update(pids)
        time.sleep(poll_s)
