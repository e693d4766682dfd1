"""Run an agent CLI as the agent: checked, confined, bounded, killed, and read back.

The same confinement as the harness loop's tool calls (guest/tools/sandbox.py), applied
to the whole CLI because every command its tools run is its child: the agent's uid (no
account, no new privileges), its own cgroup under the agent's parent (memory without
swap, pids, CPU), a private mount namespace whose /tmp, /var/tmp and /dev/shm are fresh
capped tmpfs (the CLI's home is there, so its state dies with the run), the workspace
the only other place it can write. Its configuration is in its environment (the
adapter's), so no file the agent's code can write configures it. When the CLI exits or
the wall deadline passes, its cgroup is killed and shown empty, then the runner reads
what is left of the uid (`finish`): anything left is `confinement_breached`.

No rlimits here (the harness loop's commands get an address-space cap): the CLI is a
JIT runtime that reserves large virtual ranges; the cgroup's memory limit is the bound.

The executable is opened once, hashed through that descriptor and run from it
(`/proc/self/fd/N`): what ran is the file whose digest the agent record names, with no
path looked up again between the hash and the exec.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from guest.agent.cli.adapter import CliAdapter, CliOutputInvalid, CliSettings, CliTranscript
from guest.agent.loop import AgentRun, Confinement
from guest.tools.sandbox import (
    CgroupLimits,
    Sandbox,
    create_call_cgroup,
    drop_privileges,
    kill_and_confirm,
    open_procs,
    private_mounts,
)
from receipts.agentclis import AgentIdentity
from receipts.records import AgentRecord
from receipts.records.agent import AgentCategory, CgroupEnd
from receipts.records.trial import Policy
from receipts.totals import agent_totals

CLI_MEMORY_BYTES = 1536 << 20
"""The CLI and everything its tools start: a Bun runtime (OpenCode 1.18.33: 638 MiB peak
RSS for a scripted fix-and-test run on the host, its 185 MB executable's pages included)
and a test run."""
GUEST_RESERVE_BYTES = 256 << 20
"""What the guest keeps for itself (its kernel, the runner, sshd) when its RAM is smaller
than the CLI's budget plus this: the cgroup then gets the rest, so the cgroup's limit,
not the guest's own OOM killer, is what a runaway command meets."""


def cli_limits(meminfo: Path = Path("/proc/meminfo")) -> CgroupLimits:
    """The CLI's cgroup budget: CLI_MEMORY_BYTES, or less in a smaller guest."""
    total = CLI_MEMORY_BYTES + GUEST_RESERVE_BYTES
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
    memory = max(256 << 20, min(CLI_MEMORY_BYTES, total - GUEST_RESERVE_BYTES))
    return CgroupLimits(memory_bytes=memory, pids=512, cpu_millicores=2000)


STREAM_CAP_BYTES = 16 << 20
"""More event stream than this is not a run the adapter reads (`cli_output_invalid`)."""
_CHUNK = 1 << 20
_POLL_S = 0.2
"""How often the runner looks at the turn count while the CLI runs."""


class ExecutableRefused(Exception):
    """The CLI's executable is not the pinned file: it is never run."""


def open_executable(path: Path, sha256: str) -> int:
    """A read-only descriptor of `path`, whose bytes (read through it) hash to `sha256`;
    ExecutableRefused otherwise (the descriptor closed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        raise ExecutableRefused("unreadable") from None
    digest, offset = hashlib.sha256(), 0
    try:
        while chunk := os.pread(fd, _CHUNK, offset):
            digest.update(chunk)
            offset += len(chunk)
    except OSError:
        os.close(fd)
        raise ExecutableRefused("unreadable") from None
    if digest.hexdigest() != sha256 or not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ExecutableRefused("digest")
    return fd


class _Stream:
    """Drains a pipe in a thread; keeps at most `cap` bytes and says if there was more.
    Counts the whole lines that begin with `turn_end`; `turn_cap` is set once there are
    `max_turns` of them."""

    def __init__(self, fd: int, cap: int, turn_end: bytes, max_turns: int) -> None:
        self.fd, self.cap = fd, cap
        self.turn_end, self.max_turns = turn_end, max_turns
        self.data = bytearray()
        self.overflowed = False
        self.turns, self._scanned = 0, 0
        self.turn_cap = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while chunk := os.read(self.fd, _CHUNK):
            if len(self.data) + len(chunk) > self.cap:
                self.overflowed = True
            else:
                self.data += chunk
                self._count()
        os.close(self.fd)

    def _count(self) -> None:
        end = self.data.rfind(b"\n") + 1  # whole lines only
        for line in bytes(self.data[self._scanned : end]).splitlines():
            self.turns += line.startswith(self.turn_end)
        self._scanned = max(self._scanned, end)
        if self.turns >= self.max_turns:
            self.turn_cap.set()


def _preexec(sandbox: Sandbox, cgroup_fd: int) -> Callable[[], None]:
    def run() -> None:
        os.write(cgroup_fd, b"0")  # the CLI's first instruction runs in its cgroup
        private_mounts(sandbox.private_dirs)
        drop_privileges(sandbox.uid, sandbox.gid)

    return run


@dataclasses.dataclass(frozen=True)
class CliExit:
    status: int | None
    """None when the runner killed it: at the wall deadline, or at the turn budget."""
    stream: bytes
    """Whole lines only: what a kill cut mid-line is dropped."""
    overflowed: bool
    cgroup_end: CgroupEnd
    turn_capped: bool = False
    """It was killed because its stream showed the turn budget used up."""


def spawn_confined(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    sandbox: Sandbox,
    deadline_s: float,
    pass_fds: tuple[int, ...] = (),
    turn_end: bytes = b"\0",
    max_turns: int = 1 << 30,
) -> CliExit:
    """Run `argv` as the agent's uid in a fresh cgroup; kill the cgroup when it ends, at
    the deadline, or once `max_turns` lines beginning with `turn_end` have arrived."""
    limits = cli_limits() if sandbox.limits is not None else None
    group = create_call_cgroup(dataclasses.replace(sandbox, limits=limits))
    cgroup_fd = open_procs(group)
    out_r, out_w = os.pipe()
    try:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=subprocess.DEVNULL,
                pass_fds=pass_fds,
                start_new_session=True,
                # subprocess has no other hook for joining a cgroup and dropping the
                # uid between fork and exec; the callable only makes syscalls.
                preexec_fn=_preexec(sandbox, cgroup_fd),  # noqa: PLW1509
            )
        finally:
            os.close(out_w)
            os.close(cgroup_fd)
    except OSError:
        os.close(out_r)
        kill_and_confirm(group)
        raise
    stream = _Stream(out_r, STREAM_CAP_BYTES, turn_end, max_turns)
    status: int | None = None
    until = time.monotonic() + deadline_s
    while (left := until - time.monotonic()) > 0 and not stream.turn_cap.is_set():
        try:
            status = process.wait(timeout=min(left, _POLL_S))
            break
        except subprocess.TimeoutExpired:
            continue
    capped = status is None and stream.turn_cap.is_set()
    end = kill_and_confirm(group)  # the CLI and everything its tools left, gone
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    stream.thread.join(timeout=10)
    data = bytes(stream.data)
    if status is None:
        data = data[: data.rfind(b"\n") + 1]
    return CliExit(status, data, stream.overflowed, end, turn_capped=capped)


def _category(exit_: CliExit, transcript: CliTranscript | None) -> AgentCategory:
    if exit_.turn_capped and transcript is not None:
        return "turn_limit"
    if exit_.status is None:
        return "wall_limit"
    if transcript is None:
        return "cli_output_invalid"
    return transcript.end


def run_cli(
    *,
    adapter: CliAdapter,
    executable: Path,
    identity: AgentIdentity,
    prompt: str,
    workspace: Path,
    settings: CliSettings,
    sandbox: Sandbox,
    confinement: Confinement,
    policy: Policy,
) -> AgentRun:
    """The CLI's run as the agent's records. Raises ExecutableRefused before anything runs."""
    started = time.monotonic()
    if identity.sha256 is None or identity.name != adapter.name:
        raise ExecutableRefused("identity")
    fd = open_executable(executable, identity.sha256)
    try:
        exit_ = spawn_confined(
            adapter.command(Path(f"/proc/self/fd/{fd}"), prompt, settings),
            cwd=workspace,
            env=adapter.environment(settings),
            sandbox=sandbox,
            deadline_s=settings.wall_deadline_s,
            pass_fds=(fd,),
            turn_end=adapter.turn_end,
            max_turns=settings.max_turns,
        )
    finally:
        os.close(fd)
    transcript: CliTranscript | None = None
    if not exit_.overflowed:
        try:
            status = exit_.status if exit_.status is not None else -9  # killed at the deadline
            transcript = adapter.transcript(exit_.stream, status, settings)
        except CliOutputInvalid:
            transcript = None
    category = _category(exit_, transcript)
    processes_left, agent_cgroup = confinement()
    if not (processes_left == 0 and agent_cgroup == "emptied" and exit_.cgroup_end == "emptied"):
        category = "confinement_breached"
    turns = transcript.turns if transcript is not None else ()
    calls = transcript.tool_calls if transcript is not None else ()
    return AgentRun(
        agent=AgentRecord(
            category=category,
            policy=policy,
            agent=identity.name,
            agent_version=identity.version,
            agent_sha256=identity.sha256,
            **agent_totals(turns, calls),
            processes_left=processes_left,
            agent_cgroup=agent_cgroup,
            duration_ms=int((time.monotonic() - started) * 1000),
        ),
        turns=turns,
        tool_calls=calls,
    )
