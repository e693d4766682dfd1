"""The SSH client against a real (in-process) SSH server: pinning, deadlines, SFTP."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from host.ssh import SshError, connect, generate_trial_keys, public_key_sha256
from tests.host.ssh.conftest import FakeGuest


async def test_pinned_key_connects_and_reports_exit_status(fake_guest: FakeGuest) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        ok = await session.run("echo hello", deadline_s=10)
        assert (ok.exit_status, ok.stdout, ok.stderr) == (0, b"hello\n", b"to stderr\n")
        failed = await session.run("exit 3", deadline_s=10)
        assert failed.exit_status == 3 and failed.exit_signal is None
        echoed = await session.run("cat", deadline_s=10, stdin=b"in\x00put")
        assert echoed.stdout == b"in\x00put"
    finally:
        await session.close()


async def test_other_host_key_is_refused(fake_guest: FakeGuest) -> None:
    impostor = generate_trial_keys()
    keys = dataclasses.replace(fake_guest.keys, host_key=impostor.host_key)
    with pytest.raises(SshError) as err:
        await connect("127.0.0.1", fake_guest.port, keys, deadline_s=10)
    assert err.value.category == "host_key_mismatch"


async def test_other_client_key_is_refused(fake_guest: FakeGuest) -> None:
    keys = dataclasses.replace(fake_guest.keys, client_key=generate_trial_keys().client_key)
    with pytest.raises(SshError) as err:
        await connect("127.0.0.1", fake_guest.port, keys, deadline_s=10)
    assert err.value.category == "auth_failed"


async def test_command_deadline_is_enforced(fake_guest: FakeGuest) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        started = time.monotonic()
        with pytest.raises(SshError) as err:
            await session.run("sleep", deadline_s=0.5)
        assert err.value.category == "command_timeout"
        assert time.monotonic() - started < 3
        after = await session.run("exit 0", deadline_s=10)
        assert after.exit_status == 0
    finally:
        await session.close()


async def test_dropped_connection_is_its_own_category(fake_guest: FakeGuest) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        with pytest.raises(SshError) as err:
            await session.run("drop", deadline_s=10)
        assert err.value.category == "connection_dropped"
    finally:
        await session.close()


async def test_output_is_bounded(fake_guest: FakeGuest) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        result = await session.run("flood 300000", deadline_s=10, output_limit=1000)
        assert len(result.stdout) == 1000 and result.stdout_truncated
        small = await session.run("flood 10", deadline_s=10, output_limit=1000)
        assert small.stdout == b"x" * 10 and not small.stdout_truncated
    finally:
        await session.close()


async def test_sftp_both_ways_and_size_limit(fake_guest: FakeGuest, tmp_path: Path) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        local = tmp_path / "up.bin"
        local.write_bytes(bytes(range(256)) * 100)
        assert await session.put(local, "/up.bin", deadline_s=10) == 25600
        assert (fake_guest.sftp_root / "up.bin").read_bytes() == local.read_bytes()
        back = tmp_path / "down.bin"
        assert await session.get("/up.bin", back, deadline_s=10) == 25600
        assert back.read_bytes() == local.read_bytes()
        with pytest.raises(SshError) as err:
            await session.put(local, "/big.bin", deadline_s=10, max_bytes=100)
        assert err.value.category == "transfer_too_large"
        with pytest.raises(SshError) as err:
            await session.get("/up.bin", tmp_path / "x", deadline_s=10, max_bytes=100)
        assert err.value.category == "transfer_too_large"
        assert not (tmp_path / "x").exists()
        with pytest.raises(SshError) as err:
            await session.get("/missing", tmp_path / "y", deadline_s=10)
        assert err.value.category == "transfer_failed"
    finally:
        await session.close()


def test_host_key_digest_is_of_the_public_blob() -> None:
    keys = generate_trial_keys()
    assert keys.host_key_sha256 == public_key_sha256(keys.host_public)
    assert len(keys.host_key_sha256) == 64
    assert keys.host_key_sha256 != public_key_sha256(keys.client_key.convert_to_public())


async def test_started_process_streams_lines_and_reports_its_end(fake_guest: FakeGuest) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        process = await session.start("lines 5", deadline_s=10, stdin=b"one\ntwo\n")
        assert await process.readline(deadline_s=10) == b"got one"
        assert await process.readline(deadline_s=10) == b"got two"
        assert await process.readline(deadline_s=10) == b""
        assert await process.wait(deadline_s=10) == (5, None)
        assert not process.running()
    finally:
        await session.close()


async def test_started_process_line_deadline_and_bound(fake_guest: FakeGuest) -> None:
    session = await connect("127.0.0.1", fake_guest.port, fake_guest.keys, deadline_s=10)
    try:
        quiet = await session.start("sleep", deadline_s=10)
        started = time.monotonic()
        with pytest.raises(SshError) as err:
            await quiet.readline(deadline_s=0.3)
        assert err.value.category == "command_timeout"
        assert time.monotonic() - started < 3
        assert quiet.running()
        quiet.close()
        flood = await session.start("huge", deadline_s=10)
        with pytest.raises(SshError) as err:
            await flood.readline(deadline_s=10, limit=1000)
        assert err.value.category == "protocol_error"
        flood.close()
        after = await session.run("exit 0", deadline_s=10)
        assert after.exit_status == 0
    finally:
        await session.close()
