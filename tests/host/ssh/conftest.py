"""An in-process asyncssh server on 127.0.0.1, so the client is tested without a VM.

The server presents a host key chosen by the test, accepts only the given client
public key, runs a tiny command language (`exit N`, `echo TEXT`, `sleep`, `flood N`,
`lines N`, `huge`, `drop`) and serves SFTP from a directory. It is real SSH on a real socket.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from host.ssh import TrialKeys, generate_trial_keys


async def handle(process: asyncssh.SSHServerProcess[bytes]) -> None:
    command = process.command or ""
    word, _, rest = command.partition(" ")
    if word == "exit":
        process.exit(int(rest))
    elif word == "echo":
        process.stdout.write(rest.encode() + b"\n")
        process.stderr.write(b"to stderr\n")
        process.exit(0)
    elif word == "cat":
        data = await process.stdin.read()
        process.stdout.write(data)
        process.exit(0)
    elif word == "flood":
        process.stdout.write(b"x" * int(rest))
        process.exit(0)
    elif word == "lines":
        # a long-running service: a line per stdin line, stderr chatter, runs until stdin ends
        process.stderr.write(b"e" * 200_000)
        async for line in process.stdin:
            process.stdout.write(b"got " + line)
        process.exit(int(rest or "0"))
    elif word == "huge":
        process.stdout.write(b"y" * 100_000 + b"\n")
        await asyncio.sleep(3600)
    elif word == "sleep":
        await asyncio.sleep(3600)
    elif word == "drop":
        process.channel.get_connection().abort()
    else:
        process.exit(127)


@dataclass
class FakeGuest:
    port: int
    keys: TrialKeys
    sftp_root: Path
    server: asyncssh.SSHAcceptor


class _Server(asyncssh.SSHServer):
    pass


@pytest.fixture
async def fake_guest(tmp_path: Path) -> AsyncIterator[FakeGuest]:
    keys = generate_trial_keys()
    root = tmp_path / "guest"
    root.mkdir()

    def sftp_factory(chan: asyncssh.SSHServerChannel[bytes]) -> asyncssh.SFTPServer:
        return asyncssh.SFTPServer(chan, chroot=str(root).encode())

    server = await asyncssh.listen(
        "127.0.0.1",
        0,
        server_factory=_Server,
        server_host_keys=[keys.host_key],
        authorized_client_keys=asyncssh.import_authorized_keys(
            keys.authorized_keys_line().decode()
        ),
        process_factory=handle,
        encoding=None,
        sftp_factory=sftp_factory,
        allow_scp=False,
    )
    port = server.sockets[0].getsockname()[1]
    try:
        yield FakeGuest(port=port, keys=keys, sftp_root=root, server=server)
    finally:
        server.close()
        await server.wait_closed()
