"""Run one command confined: own process group, rlimits, wall deadline, no network.

Why each piece:
- Own session/process group (`start_new_session`), and the whole group is killed
  with SIGKILL when the command ends or the deadline passes: test suites leave
  background processes behind, and a sleeping grandchild must not outlive the call.
  The leader is not reaped until after the group kill (`waitid(WNOWAIT)`), so the
  group id cannot be reused by an unrelated process in between.
- rlimits (CPU, address space, file size, process count) are set in the child
  before exec, where they are inherited by everything it starts.
- Network: a new, empty network namespace (only a downed loopback). Python 3.11 has
  no `os.unshare`, so the syscall goes through libc (`ctypes`) in the child before
  exec; if libc has no `unshare`, the `unshare -n` binary wraps the command. Either
  way the child reports the namespace it ended up in over a close-on-exec pipe and
  we compare it with ours: isolation is `applied` only when they differ, `unread`
  when the read-back failed, `not_applied` when nothing worked. Nothing pretends.
- Output (stdout and stderr merged) is drained by a thread into a bounded tail;
  the total byte count is kept, so truncation is exact.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import resource
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from guest.tools.categories import NetIsolation, NetMechanism, NetPolicy, RunExit
from guest.tools.sandbox import (
    Sandbox,
    create_call_cgroup,
    drop_privileges,
    kill_and_confirm,
    open_procs,
    private_mounts,
)
from receipts.records.agent import CgroupEnd

CLONE_NEWNET = 0x40000000
_NS_LINK = "/proc/self/ns/net"
_MARK_BYTES = 256


class RunLimits(BaseModel):
    """Budgets for one run of the test command (declared by the operator)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    wall_seconds: Annotated[float, Field(gt=0, le=24 * 3600)] = 600.0
    cpu_seconds: Annotated[int, Field(ge=1, le=24 * 3600)] = 600
    address_space_bytes: Annotated[int, Field(ge=64 * 1024 * 1024, le=2**48)] = 4 * 1024**3
    file_size_bytes: Annotated[int, Field(ge=1, le=2**48)] = 256 * 1024 * 1024
    nproc: Annotated[int, Field(ge=1, le=1_000_000)] = 1024
    tail_lines: Annotated[int, Field(ge=1, le=1000)] = 60
    tail_bytes: Annotated[int, Field(ge=256, le=1024 * 1024)] = 16 * 1024


@dataclass(frozen=True)
class RunReport:
    """What happened. `tail` is test output for the model only."""

    exit: RunExit | None  # None: the command never started
    returncode: int | None
    net_isolation: NetIsolation
    net_mechanism: NetMechanism
    tail: str
    output_bytes: int
    omitted_bytes: int
    duration_ms: int
    cgroup_end: CgroupEnd | None = None
    """With a sandbox: how the call's cgroup ended (guest/tools/sandbox.py)."""


def _load_libc_unshare() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.unshare
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_LIBC_UNSHARE = _load_libc_unshare()


def own_net_namespace() -> str | None:
    try:
        return os.readlink(_NS_LINK)
    except OSError:
        return None


def available_mechanism() -> NetMechanism:
    """The mechanism `auto` would use here."""
    if _LIBC_UNSHARE is not None:
        return "unshare_syscall"
    if shutil.which("unshare") is not None:
        return "unshare_binary"
    return "none"


def _set_limits(limits: RunLimits) -> None:
    pairs = (
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_AS, limits.address_space_bytes),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_NPROC, limits.nproc),
    )
    for which, value in pairs:
        _soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        # CPU: SIGXCPU at the soft limit (a nameable category), SIGKILL 1 s later.
        top = cap + 1 if which == resource.RLIMIT_CPU else cap
        if hard != resource.RLIM_INFINITY:
            top = min(top, hard)
        resource.setrlimit(which, (cap, top))


RunAs = tuple[int, int]
"""(uid, gid) to become in the child, after the namespace is made (that needs root)."""


def _preexec(
    limits: RunLimits,
    mark_fd: int | None,
    run_as: RunAs | None = None,
    sandbox: Sandbox | None = None,
    cgroup_fd: int | None = None,
) -> Callable[[], None]:
    """The child's last steps before exec. Raising here aborts the exec. With a sandbox:
    join the call's cgroup first, then the private mounts, and drop to the agent's uid
    last (every step before it needs root)."""

    def run() -> None:
        if cgroup_fd is not None:
            os.write(cgroup_fd, b"0")
        if sandbox is not None:
            private_mounts(sandbox.private_dirs)
        if mark_fd is not None:
            assert _LIBC_UNSHARE is not None
            if _LIBC_UNSHARE(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            try:
                ns = os.readlink(_NS_LINK)
            except OSError:
                ns = ""
            os.write(mark_fd, ("ok:" + ns).encode()[:_MARK_BYTES])
        _set_limits(limits)
        if sandbox is not None:
            drop_privileges(sandbox.uid, sandbox.gid)
        elif run_as is not None:
            uid, gid = run_as
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

    return run


# Runs inside the new namespace with the marker pipe as its stdin: report the
# namespace there, replace stdin with /dev/null, and become the command.
_BINARY_WRAPPER = (
    'printf "ok:%s" "$(readlink /proc/self/ns/net 2>/dev/null)" >&0; exec 0</dev/null; exec "$@"'
)


class _Tail:
    """Drains a pipe into a bounded tail of bytes, counting everything read."""

    def __init__(self, fd: int, cap: int) -> None:
        self._fd = fd
        self._cap = cap
        self._buf = bytearray()
        self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.05)
            if not ready:
                continue
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return
            self.total += len(chunk)
            self._buf += chunk
            if len(self._buf) > self._cap:
                del self._buf[: len(self._buf) - self._cap]

    def finish(self, grace_s: float) -> bytes:
        self._thread.join(grace_s)
        self._stop.set()
        self._thread.join()
        return bytes(self._buf)


def _read_mark(fd: int, deadline: float) -> str | None:
    """Read the child's namespace report until EOF or deadline."""
    data = b""
    while len(data) < _MARK_BYTES:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            break
        chunk = os.read(fd, _MARK_BYTES)
        if not chunk:
            break
        data += chunk
    text = data.decode("utf-8", "replace")
    return text[3:] if text.startswith("ok:") else None


def _judge(mark: str | None, ours: str | None) -> NetIsolation:
    if mark is None:
        return "not_applied"
    if not mark or ours is None:
        return "unread"
    return "applied" if mark != ours else "not_applied"


def _exit_category(returncode: int, timed_out: bool, cpu_used: float, cpu_cap: int) -> RunExit:
    if timed_out:
        return "deadline"
    if returncode == 0:
        return "passed"
    if returncode > 0:
        return "failed"
    if -returncode == signal.SIGXCPU or (-returncode == signal.SIGKILL and cpu_used >= cpu_cap):
        return "cpu_limit"
    if -returncode == signal.SIGXFSZ:
        return "file_size_limit"
    return "signaled"


def _wait_unreaped(pid: int, deadline: float) -> bool:
    """Wait for `pid` to exit without reaping it; True if the deadline passed first."""
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        time.sleep(min(0.01, remaining))


def _tail_text(raw: bytes, total: int, limits: RunLimits) -> tuple[str, int]:
    """The last lines of the output and the number of output bytes not shown.

    Lines are cut and counted on the bytes (a line ends at LF) and decoded only to be
    shown: an undecodable byte is shown as U+FFFD, three bytes in UTF-8, but is one byte
    of the output, so counting the shown text would under-count what was left out.
    """
    if total == len(raw) and raw.count(b"\n") <= limits.tail_lines:
        return raw.decode("utf-8", "replace"), 0  # everything fits: nothing omitted
    if total > len(raw) and b"\n" in raw:  # the first kept line is probably partial
        raw = raw.split(b"\n", 1)[1]
    lines = raw.split(b"\n")
    if lines[-1] == b"":  # the output's last newline ends a line, it does not start one
        lines.pop()
    kept = b"\n".join(lines[-limits.tail_lines :])
    return kept.decode("utf-8", "replace"), total - len(kept)


def run_confined(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    limits: RunLimits,
    net_policy: NetPolicy,
    mechanism: Literal["auto", "unshare_syscall", "unshare_binary"] = "auto",
    run_as: RunAs | None = None,
    sandbox: Sandbox | None = None,
) -> RunReport:
    """Run `argv` under `limits`; see the module docstring for the guarantees.

    `run_as` drops to that user in the child; it needs the syscall mechanism (the
    `unshare` binary would have to run as root after the drop), or none. `sandbox`
    runs the command as the agent's uid in its own cgroup and mount namespace
    (guest/tools/sandbox.py) and kills the whole cgroup when the leader ends; it
    raises SandboxUnavailable when the call's cgroup cannot be made.
    """
    start = time.monotonic()
    chosen: NetMechanism = "none"
    if net_policy != "disabled":
        chosen = available_mechanism() if mechanism == "auto" else mechanism
    if (run_as is not None or sandbox is not None) and chosen == "unshare_binary":
        raise ValueError("run_as and sandbox need the unshare syscall mechanism")
    report = _attempt(argv, cwd=cwd, env=env, limits=limits, mechanism=chosen, start=start,
                      run_as=run_as, sandbox=sandbox)  # fmt: skip
    if report is None and net_policy == "best_effort" and chosen != "none":
        report = _attempt(argv, cwd=cwd, env=env, limits=limits, mechanism="none", start=start,
                          run_as=run_as, sandbox=sandbox)  # fmt: skip
    if report is None:
        return RunReport(
            exit=None,
            returncode=None,
            net_isolation="not_applied",
            net_mechanism=chosen,
            tail="",
            output_bytes=0,
            omitted_bytes=0,
            duration_ms=int((time.monotonic() - start) * 1000),
        )
    return report


def _attempt(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    limits: RunLimits,
    mechanism: NetMechanism,
    start: float,
    run_as: RunAs | None = None,
    sandbox: Sandbox | None = None,
) -> RunReport | None:
    """One try with `mechanism`; None when isolation failed before the command ran.

    Raises OSError when the command itself cannot be started.
    """
    group = create_call_cgroup(sandbox) if sandbox is not None else None
    cgroup_end: CgroupEnd | None = None
    try:
        report = _attempt_in(argv, cwd=cwd, env=env, limits=limits, mechanism=mechanism,
                             start=start, run_as=run_as, sandbox=sandbox, group=group)  # fmt: skip
    finally:
        if group is not None:
            # Every process the command started, detached ones included, ends here.
            cgroup_end = kill_and_confirm(group)
    if report is None or group is None:
        return report
    return dataclasses.replace(report, cgroup_end=cgroup_end)


def _kill_group(pid: int, group: Path | None) -> None:
    """Kill the call's cgroup (when it has one) and the command's process group."""
    if group is not None:
        with contextlib.suppress(OSError):  # its end is read (and retried) by the caller
            (group / "cgroup.kill").write_text("1")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _attempt_in(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    limits: RunLimits,
    mechanism: NetMechanism,
    start: float,
    run_as: RunAs | None,
    sandbox: Sandbox | None,
    group: Path | None,
) -> RunReport | None:
    mark_r, mark_w = os.pipe()
    out_r, out_w = os.pipe()
    full_argv = list(argv)
    stdin: int = subprocess.DEVNULL
    preexec_mark: int | None = None
    if mechanism == "unshare_syscall":
        preexec_mark = mark_w
    elif mechanism == "unshare_binary":
        unshare = shutil.which("unshare") or "unshare"
        full_argv = [unshare, "-n", "--", "/bin/sh", "-c", _BINARY_WRAPPER, "sh", *argv]
        stdin = mark_w
    ours = own_net_namespace()
    cgroup_fd = open_procs(group) if group is not None else None
    try:
        try:
            proc = subprocess.Popen(
                full_argv,
                cwd=cwd,
                env=dict(env),
                stdin=stdin,
                stdout=out_w,
                stderr=out_w,
                start_new_session=True,
                # setrlimit and unshare must run in the child before exec; subprocess
                # offers no other hook. The preexec touches no locks: two syscalls,
                # one readlink and one write (PLW1509's threads concern).
                preexec_fn=_preexec(limits, preexec_mark, run_as, sandbox, cgroup_fd),  # noqa: PLW1509
                close_fds=True,
            )
        except subprocess.SubprocessError:
            return None  # the preexec step (unshare) failed: nothing ran
        finally:
            os.close(out_w)
            os.close(mark_w)
            if cgroup_fd is not None:
                os.close(cgroup_fd)
        tail = _Tail(out_r, limits.tail_bytes)
        deadline = start + limits.wall_seconds
        mark = None
        try:
            if mechanism != "none":
                mark = _read_mark(mark_r, deadline)
            timed_out = _wait_unreaped(proc.pid, deadline)
        except BaseException:
            # Whatever stopped the wait (an interrupt, an unexpected error), the command
            # and everything it started end with it: nothing a call starts outlives it.
            _kill_group(proc.pid, group)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(proc.pid, 0)
            tail.finish(grace_s=1.0)  # the drain ends at EOF, before its pipe is closed
            raise
        _kill_group(proc.pid, group)
        # Reap with wait4 for the leader's CPU use; tell Popen it is reaped.
        _pid, status, usage = os.wait4(proc.pid, 0)
        returncode = os.waitstatus_to_exitcode(status)
        proc.returncode = returncode
        cpu_used = usage.ru_utime + usage.ru_stime
        raw = tail.finish(grace_s=1.0)
    finally:
        os.close(mark_r)
        with contextlib.suppress(OSError):
            os.close(out_r)
    if mechanism == "unshare_binary" and mark is None:
        return None  # unshare(1) failed before the wrapper ran: nothing ran
    net = _judge(mark, ours) if mechanism != "none" else "not_applied"
    text, omitted = _tail_text(raw, tail.total, limits)
    return RunReport(
        exit=_exit_category(returncode, timed_out, cpu_used, limits.cpu_seconds),
        returncode=returncode,
        net_isolation=net,
        net_mechanism=mechanism,
        tail=text,
        output_bytes=tail.total,
        omitted_bytes=omitted,
        duration_ms=int((time.monotonic() - start) * 1000),
    )
