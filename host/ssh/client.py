"""An SSH session to a guest: pinned host key, commands with deadlines, small SFTP.

Why these choices:
- The host key is pinned to the one ephemeral key generated for this trial
  (`known_hosts=([key], [], [])`, ed25519 only): a guest that presents any other key
  is refused with `host_key_mismatch`. Host-key checking is never turned off.
- No ambient configuration is read: no `~/.ssh/config` (`config=None`), no agent
  (`agent_path=None`), no default identity files; only the trial's client key.
- Every command has a deadline and returns its exit status (or the signal that
  ended it); output is bounded so a chatty guest cannot exhaust host memory.
- SFTP is for small files (2-4 MB/s under TCG); larger data goes by read-only disk.
Errors are `SshError` with a closed category, never the library's exception text.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from host.ssh.categories import SshFailure
from host.ssh.errors import SshError
from host.ssh.keys import TrialKeys

DEFAULT_OUTPUT_LIMIT = 1 << 20
DEFAULT_TRANSFER_LIMIT = 16 << 20


@dataclass(frozen=True)
class CommandResult:
    """How a remote command ended, with its (bounded) output."""

    exit_status: int | None
    """None when the command was ended by a signal."""
    exit_signal: str | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration_ms: int


def pinned_known_hosts(
    host_public: asyncssh.SSHKey,
) -> tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]:
    """asyncssh's (trusted host keys, trusted CA keys, revoked keys): exactly one key."""
    return ([host_public], [], [])


def _connect_failure(exc: BaseException) -> SshFailure:
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return "host_key_mismatch"
    if isinstance(exc, asyncssh.PermissionDenied):
        return "auth_failed"
    if isinstance(exc, ConnectionRefusedError):
        return "connect_refused"
    if isinstance(exc, TimeoutError):
        return "connect_timeout"
    if isinstance(exc, asyncssh.ConnectionLost | OSError):
        return "connection_dropped"
    return "protocol_error"


async def connect(
    host: str,
    port: int,
    keys: TrialKeys,
    *,
    deadline_s: float,
    username: str = "root",
    sock: socket.socket | None = None,
) -> SshSession:
    """Log in with the trial's client key, accepting only the trial's host key.

    `sock`: an already connected socket (from `open_ssh_socket`) to run SSH over.
    """
    try:
        async with asyncio.timeout(deadline_s):
            conn = await asyncssh.connect(
                host,
                port,
                username=username,
                sock=sock,
                client_keys=[keys.client_key],
                known_hosts=pinned_known_hosts(keys.host_public),
                server_host_key_algs=["ssh-ed25519"],
                preferred_auth="publickey",
                agent_path=None,
                config=None,
                connect_timeout=deadline_s,
                login_timeout=deadline_s,
                keepalive_interval=15,
                keepalive_count_max=4,
            )
    except (asyncssh.Error, OSError, TimeoutError) as exc:
        raise SshError(_connect_failure(exc)) from None
    return SshSession(conn)


async def _read_bounded(stream: asyncssh.SSHReader[bytes], limit: int) -> tuple[bytes, bool]:
    """Read to EOF, keeping at most `limit` bytes (the rest is drained and dropped)."""
    kept = bytearray()
    truncated = False
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return bytes(kept), truncated
        room = limit - len(kept)
        if len(chunk) > room:
            truncated = True
        kept += chunk[: max(room, 0)]


class RemoteProcess:
    """A guest command that keeps running while the trial goes on (the guest worker).

    Its stdin is written once and closed; stdout is read line by line under a
    deadline, each line bounded; stderr is drained and dropped so a chatty process
    can never block on a full channel. It is ended by the caller (a signal sent by
    another command), and `wait` reports how it ended.
    """

    def __init__(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self._process = process
        self._drain = asyncio.ensure_future(_read_bounded(process.stderr, 0))

    async def readline(self, *, deadline_s: float, limit: int = 65536) -> bytes:
        """One stdout line (without the newline); b"" once stdout has ended."""
        try:
            async with asyncio.timeout(deadline_s):
                line = await self._process.stdout.readline()
        except TimeoutError:
            raise SshError("command_timeout") from None
        except (asyncssh.Error, OSError):
            raise SshError("connection_dropped") from None
        if len(line) > limit:
            raise SshError("protocol_error")
        return line.rstrip(b"\n")

    def running(self) -> bool:
        """Whether the channel is still open (the remote command has not ended)."""
        return self._process.exit_status is None and self._process.exit_signal is None

    async def wait(self, *, deadline_s: float) -> tuple[int | None, str | None]:
        """(exit status, signal name) once the remote command has ended."""
        try:
            async with asyncio.timeout(deadline_s):
                completed = await self._process.wait(check=False)
        except TimeoutError:
            raise SshError("command_timeout") from None
        except (asyncssh.Error, OSError):
            raise SshError("connection_dropped") from None
        finally:
            self._drain.cancel()
        signal = completed.exit_signal[0] if completed.exit_signal else None
        return (completed.exit_status if signal is None else None), signal

    def close(self) -> None:
        """Close the channel (does not by itself end the remote command)."""
        self._drain.cancel()
        with contextlib.suppress(asyncssh.Error, OSError):
            self._process.close()


class SshSession:
    """One authenticated connection to a guest."""

    def __init__(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn

    async def run(
        self,
        command: str,
        *,
        deadline_s: float,
        stdin: bytes | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> CommandResult:
        """Run `command`; `command_timeout` if it has not exited by the deadline."""
        started = time.monotonic()
        process: asyncssh.SSHClientProcess[bytes] | None = None
        try:
            async with asyncio.timeout(deadline_s):
                process = await self._conn.create_process(command, encoding=None)
                if stdin is not None:
                    process.stdin.write(stdin)
                process.stdin.write_eof()
                (out, out_cut), (err, err_cut) = await asyncio.gather(
                    _read_bounded(process.stdout, output_limit),
                    _read_bounded(process.stderr, output_limit),
                )
                completed = await process.wait(check=False)
        except TimeoutError:
            if process is not None:
                with contextlib.suppress(asyncssh.Error, OSError):
                    process.close()
            raise SshError("command_timeout") from None
        except (asyncssh.Error, OSError, BrokenPipeError):
            raise SshError("connection_dropped") from None
        return CommandResult(
            exit_status=completed.exit_status if completed.exit_signal is None else None,
            exit_signal=completed.exit_signal[0] if completed.exit_signal else None,
            stdout=out,
            stderr=err,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    async def start(self, command: str, *, deadline_s: float, stdin: bytes = b"") -> RemoteProcess:
        """Start `command`, write `stdin` and close it, and return without waiting."""
        try:
            async with asyncio.timeout(deadline_s):
                process = await self._conn.create_process(command, encoding=None)
                process.stdin.write(stdin)
                process.stdin.write_eof()
        except TimeoutError:
            raise SshError("command_timeout") from None
        except (asyncssh.Error, OSError):
            raise SshError("connection_dropped") from None
        return RemoteProcess(process)

    async def put(
        self,
        local: Path,
        remote: str,
        *,
        deadline_s: float,
        max_bytes: int = DEFAULT_TRANSFER_LIMIT,
    ) -> int:
        """Copy a small local file to the guest; return its size."""
        size = local.stat().st_size
        if size > max_bytes:
            raise SshError("transfer_too_large")
        await self._sftp(lambda sftp: sftp.put(str(local), remote), deadline_s)
        return size

    async def get(
        self,
        remote: str,
        local: Path,
        *,
        deadline_s: float,
        max_bytes: int = DEFAULT_TRANSFER_LIMIT,
    ) -> int:
        """Copy a small guest file to `local` (refused before transfer if too large)."""

        async def fetch(sftp: asyncssh.SFTPClient) -> None:
            attrs = await sftp.stat(remote)
            if attrs.size is None or attrs.size > max_bytes:
                raise SshError("transfer_too_large")
            await sftp.get(remote, str(local))

        await self._sftp(fetch, deadline_s)
        size = local.stat().st_size
        if size > max_bytes:
            local.unlink()
            raise SshError("transfer_too_large")
        return size

    async def _sftp(self, action: Any, deadline_s: float) -> None:
        try:
            async with asyncio.timeout(deadline_s):
                async with self._conn.start_sftp_client() as sftp:
                    await action(sftp)
        except SshError:
            raise
        except TimeoutError:
            raise SshError("transfer_timeout") from None
        except (asyncssh.SFTPError, OSError):
            raise SshError("transfer_failed") from None
        except asyncssh.Error:
            raise SshError("connection_dropped") from None

    async def close(self) -> None:
        self._conn.close()
        with contextlib.suppress(asyncssh.Error, OSError):
            await self._conn.wait_closed()
