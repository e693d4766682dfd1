"""Wait until something at HOST:PORT speaks SSH, and hand over that very connection.

Why: QEMU's user-network hostfwd accepts the TCP connection before the guest's sshd
listens, and an `asyncssh.connect` to that half-open forward hangs. So each attempt
connects and waits (1 s timeouts) until the peer sends an `SSH-` identification
line, retrying until the deadline. The line is only *peeked* (MSG_PEEK), so the
connection that proved sshd is up is the one the SSH session then runs over: sshd
re-executes itself for every connection, which under TCG costs a noticeable part of
a second, and a probe connection thrown away would pay that twice. `alive()` lets
the caller stop early when the VM died.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from typing import Literal

from host.ssh.errors import SshError

ATTEMPT_TIMEOUT_S = 1.0
_Outcome = Literal["banner", "silent", "refused"]


async def _readable(sock: socket.socket, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await asyncio.wait_for(ready, timeout_s)
    finally:
        loop.remove_reader(sock.fileno())


async def _attempt(host: str, port: int, timeout_s: float) -> tuple[_Outcome, socket.socket | None]:
    """One connection: ("banner", socket) with the banner unread, or why not."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    keep = False
    try:
        try:
            await asyncio.wait_for(loop.sock_connect(sock, (host, port)), timeout_s)
        except (ConnectionRefusedError, ConnectionResetError):
            return "refused", None
        while True:
            remaining = end - loop.time()
            if remaining <= 0:
                return "silent", None
            await _readable(sock, remaining)
            data = sock.recv(255, socket.MSG_PEEK)
            if len(data) >= 4 or not data:  # EOF: hostfwd with nothing behind it yet
                break
            await asyncio.sleep(0.01)  # a partial line: let the rest arrive
    except (TimeoutError, OSError):
        return "silent", None
    else:
        if not data.startswith(b"SSH-"):
            return "silent", None
        keep = True
        return "banner", sock
    finally:
        if not keep:
            sock.close()


async def open_ssh_socket(
    host: str,
    port: int,
    deadline_s: float,
    *,
    alive: Callable[[], bool] | None = None,
    attempt_timeout_s: float = ATTEMPT_TIMEOUT_S,
) -> socket.socket:
    """A connected socket whose peer has sent an SSH banner (not yet consumed).

    `connect_refused` means every attempt was refused (nothing ever listened);
    `banner_timeout` means something accepted but never spoke SSH in time;
    `connection_dropped` means `alive()` said the VM is gone.
    """
    end = time.monotonic() + deadline_s
    ever_accepted = False
    while True:
        if alive is not None and not alive():
            raise SshError("connection_dropped")
        remaining = end - time.monotonic()
        if remaining <= 0:
            raise SshError("banner_timeout" if ever_accepted else "connect_refused")
        outcome, sock = await _attempt(host, port, min(attempt_timeout_s, remaining))
        if sock is not None:
            return sock
        if outcome == "silent":
            ever_accepted = True
        await asyncio.sleep(min(0.1, max(0.0, end - time.monotonic())))


async def wait_for_banner(
    host: str,
    port: int,
    deadline_s: float,
    *,
    alive: Callable[[], bool] | None = None,
    attempt_timeout_s: float = ATTEMPT_TIMEOUT_S,
) -> float:
    """Seconds until the banner came (the connection is closed again)."""
    started = time.monotonic()
    sock = await open_ssh_socket(
        host, port, deadline_s, alive=alive, attempt_timeout_s=attempt_timeout_s
    )
    with contextlib.suppress(OSError):
        sock.close()
    return time.monotonic() - started
