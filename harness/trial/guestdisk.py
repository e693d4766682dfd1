"""Whether the guest's writable disk is full, read when a guest stage has failed.

Why: an agent (or its tests) that fills the guest's disk makes the next write fail
with ENOSPC somewhere deep in a guest process: the agent exits non-zero, its record is
cut short, or a file transfer fails. Without this probe the trial would end as a
generic failure or a misnamed `ssh_dropped`; with it, the VM record says
`guest_disk_full`. The probe asks the kernel (`statfs` of the root filesystem, where
`/work` lives) and answers in three values: a probe that could not run is `unread`,
never `not_full`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from host.ssh import CommandResult
from host.ssh.errors import SshError
from host.vm.errors import VmError

DiskState = Literal["full", "not_full", "unread"]

PROBE = "stat -f -c '%a %S %d' /"
"""Blocks available to unprivileged writers, the block size, and free inodes."""

PROBE_DEADLINE_S = 30.0

FULL_BELOW_BYTES = 1 << 20
"""Below 1 MiB available, a stage that failed failed for lack of disk: the smallest
thing a stage writes after the agent (the verification copy of a task) is larger."""


def parse_probe(result: CommandResult) -> DiskState:
    """Three answers from the probe's output; anything unexpected is `unread`."""
    if result.exit_status != 0 or result.stdout_truncated:
        return "unread"
    fields = result.stdout.split()
    if len(fields) != 3 or not all(field.isdigit() for field in fields):
        return "unread"
    available_blocks, block_size, free_inodes = (int(field) for field in fields)
    if block_size == 0:
        return "unread"
    if available_blocks * block_size < FULL_BELOW_BYTES or free_inodes == 0:
        return "full"
    return "not_full"


async def probe_disk(run: Callable[[str, float], Awaitable[CommandResult]]) -> DiskState:
    """Run the probe with `run` (the trial's guest command runner)."""
    try:
        result = await run(PROBE, PROBE_DEADLINE_S)
    except (SshError, VmError):
        return "unread"
    return parse_probe(result)
