"""Waiting for the SSH banner: refused, silent, dead VM, and success."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from host.ssh import SshError, wait_for_banner

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def speaking_port() -> AsyncIterator[int]:
    async def handler(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"SSH-2.0-Test\r\n")
        await w.drain()
        w.close()

    async for port in serve(handler):
        yield port


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.read(1)  # accept, like QEMU's hostfwd before sshd listens
        w.close()

    async for port in serve(handler):
        yield port


@pytest.fixture
async def hangup_port() -> AsyncIterator[int]:
    async def handler(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()  # QEMU's hostfwd before sshd listens: accept, then EOF

    async for port in serve(handler):
        yield port


@pytest.fixture
async def other_protocol_port() -> AsyncIterator[int]:
    async def handler(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await w.drain()
        w.close()

    async for port in serve(handler):
        yield port


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_banner_arrives(speaking_port: int) -> None:
    assert await wait_for_banner("127.0.0.1", speaking_port, 5) < 5


async def test_accepting_but_silent_is_banner_timeout(silent_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(SshError) as err:
        await wait_for_banner("127.0.0.1", silent_port, 2.5)
    assert err.value.category == "banner_timeout"
    assert time.monotonic() - started < 4.5  # 1 s attempts; the deadline holds


async def test_accept_then_eof_is_not_a_banner(hangup_port: int) -> None:
    with pytest.raises(SshError) as err:
        await wait_for_banner("127.0.0.1", hangup_port, 1.5)
    assert err.value.category == "banner_timeout"


async def test_another_protocol_is_not_a_banner(other_protocol_port: int) -> None:
    with pytest.raises(SshError) as err:
        await wait_for_banner("127.0.0.1", other_protocol_port, 1.5)
    assert err.value.category == "banner_timeout"


async def test_nothing_listening_is_connect_refused() -> None:
    with pytest.raises(SshError) as err:
        await wait_for_banner("127.0.0.1", closed_port(), 1.0)
    assert err.value.category == "connect_refused"


async def test_dead_vm_stops_the_wait_early(silent_port: int) -> None:
    started = time.monotonic()
    with pytest.raises(SshError) as err:
        await wait_for_banner("127.0.0.1", silent_port, 30, alive=lambda: False)
    assert err.value.category == "connection_dropped"
    assert time.monotonic() - started < 1
