"""Starting a child that is inside the cgroup before it runs any of its own code.

Two ways exist: start the child and then move it, or have the child move itself
between fork and exec. Start-then-move leaves a window in which the program runs
outside its budget: it can allocate, or fork helpers that stay behind in the old
cgroup (a move takes one process, not its existing children). So the child joins in
`preexec_fn`: it writes `0` ("myself", in both versions) to descriptors on every
`cgroup.procs` that the parent opened with O_CLOEXEC (so they vanish at exec). If
that write fails, `preexec_fn` raises, the child never execs, and `Popen` raises:
the failure is closed, never a child running unbudgeted.

The cost: `preexec_fn` runs Python in the forked child, which CPython documents as
unsafe when the parent has other threads (a lock held at fork time can deadlock the
child). The function below does only `os.write` on integers prepared beforehand; call
it from the orchestrator thread that owns the trial.
"""

import os
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from host.cgroups.errors import CgroupError
from host.cgroups.interface import Cgroup


def join_preexec(fds: Sequence[int], then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A `preexec_fn` that moves the calling (child) process into the cgroup."""
    prepared = tuple(fds)

    def preexec() -> None:
        for fd in prepared:
            os.write(fd, b"0")
        if then is not None:
            then()

    return preexec


def spawn_in_cgroup(
    cgroup: Cgroup,
    argv: Sequence[str],
    *,
    then: Callable[[], None] | None = None,
    **popen_kwargs: Any,
) -> "subprocess.Popen[bytes]":
    """Start `argv` already inside `cgroup`; `spawn_failed` if it could not be.

    `then` runs in the child after it joined (for example `PR_SET_PDEATHSIG`).
    """
    if "preexec_fn" in popen_kwargs:
        raise CgroupError("invalid_value")
    fds = cgroup.procs_fds_for_preexec()
    try:
        # preexec_fn on purpose: see the module docstring for the race it closes.
        preexec = join_preexec(fds, then)
        return subprocess.Popen(list(argv), preexec_fn=preexec, **popen_kwargs)  # noqa: PLW1509
    except (subprocess.SubprocessError, OSError):
        raise CgroupError("spawn_failed") from None
    finally:
        for fd in fds:
            os.close(fd)
