"""Starting QEMU inside the trial's cgroup, tied to our life, and ending it.

Why:
- The child joins the cgroup between fork and exec (host.cgroups.spawn_in_cgroup), so
  QEMU never runs a single instruction outside its budget.
- `PR_SET_PDEATHSIG(SIGKILL)` is set in the same window: if the orchestrator dies,
  the kernel kills QEMU instead of leaving it holding its port and memory. The
  signal fires when the *thread* that forked exits, so spawn from the orchestrator's
  long-lived thread (the event loop's), never from a worker thread. If the parent is
  already gone by then, the child exits instead of running unowned.
- `start_new_session=True`: a Ctrl-C at the terminal reaches us, not QEMU; we stop it.
- Every child is `wait()`ed: on this host PID 1 reaps orphans only after seconds.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from host.cgroups import Cgroup, spawn_in_cgroup

PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def pdeathsig_preexec(parent_pid: int) -> Callable[[], None]:
    """Runs in the child before exec: die with the parent, or exit if it is gone."""
    sig = int(signal.SIGKILL)

    def preexec() -> None:
        if _prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent_pid:
            os._exit(127)

    return preexec


def spawn_qemu(argv: Sequence[str], cgroup: Cgroup, log_path: Path) -> subprocess.Popen[bytes]:
    """Start `argv` in `cgroup` with PDEATHSIG; stdout and stderr go to `log_path`."""
    with log_path.open("ab") as log:
        return spawn_in_cgroup(
            cgroup,
            argv,
            then=pdeathsig_preexec(os.getpid()),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=True,
        )


async def wait_exit(process: subprocess.Popen[bytes], deadline_s: float) -> int | None:
    """Reap `process` if it exits within the deadline; its return code, else None."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        code = process.poll()
        if code is not None:
            return code
        if loop.time() >= end:
            return None
        await asyncio.sleep(0.02)


def status_field(pid: int, key: str) -> str | None:
    """The value of one ``Key:`` line of /proc/PID/status, or None if unread."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return value.strip()
    return None


def peak_rss_bytes(pid: int) -> int | None:
    """VmHWM of a live process, or None if it cannot be read."""
    value = status_field(pid, "VmHWM")
    fields = value.split() if value is not None else []
    return int(fields[0]) * 1024 if fields and fields[0].isdigit() else None


def seccomp_mode(pid: int) -> int | None:
    """The kernel's word on process `pid`'s seccomp: 0 off, 1 strict, 2 filter; None unread."""
    value = status_field(pid, "Seccomp")
    return int(value) if value is not None and value.isdigit() else None


def sandbox_options(pid: int) -> list[str]:
    """Every `-sandbox` value on process `pid`'s command line, in order."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    return [
        argv[i + 1].decode("utf-8", "replace")
        for i in range(len(argv) - 1)
        if argv[i] == b"-sandbox"
    ]
