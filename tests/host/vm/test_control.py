"""The control port's host half against a scripted guest on a real Unix socket."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from host.image.contract import CONTROL_CONFIGURED, CONTROL_READY
from host.ssh import generate_trial_keys
from host.vm.control import TrialFields, configure, one_line, wait_waiting
from host.vm.errors import VmError
from host.vm.qemu import CONSOLE_TAIL_BYTES, console_last_line


def fields(*, data_disk: bool = True) -> TrialFields:
    return TrialFields.fresh(generate_trial_keys(), data_disk=data_disk)


def test_the_message_carries_each_field_once_and_ends() -> None:
    trial = fields()
    lines = trial.message().decode().splitlines()
    names = [line.split(" ", 1)[0] for line in lines]
    assert names == ["host_key", "authorized_keys", "clock", "seed", "data", "end"]
    values = dict(line.split(" ", 1) for line in lines[:-1])
    # what the guest's `printf %b` writes back: the key text, byte for byte
    assert values["host_key"].replace("\\n", "\n").encode() == trial.host_key
    assert values["authorized_keys"].replace("\\n", "\n").encode() == trial.authorized_keys
    assert "\n" not in values["host_key"] and trial.host_key.count(b"\n") > 3
    assert int(values["clock"]) == trial.clock_s and values["data"] == "yes"
    assert bytes.fromhex(values["seed"]) == trial.seed and len(trial.seed) == 32
    assert b"BEGIN OPENSSH PRIVATE KEY" in trial.host_key  # the key itself, encoded
    assert fields(data_disk=False).message().decode().splitlines()[-2] == "data no"


@pytest.mark.parametrize("text", [b"a\\nb", b"caf\xc3\xa9", b"tab\there"])
def test_key_text_the_guest_would_reinterpret_is_refused(text: bytes) -> None:
    with pytest.raises((ValueError, UnicodeDecodeError)):
        one_line(text)


def test_two_trials_never_get_the_same_seed_or_key() -> None:
    one, two = fields(), fields()
    assert one.seed != two.seed and one.host_key != two.host_key


async def guest(
    socket: Path, replies: list[bytes], received: list[bytes], *, close: bool = False
) -> asyncio.Server:
    """A guest that records what the host sent and answers `replies`, line by line; it
    keeps the port open (as a live guest does) unless told to `close` it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for reply in replies:
            writer.write(reply)
            await writer.drain()
        while line := await reader.readline():
            received.append(line)
            if line == b"end\n":
                break
        if close:
            writer.close()
        else:
            await reader.read()  # until the host hangs up

    return await asyncio.start_unix_server(serve, str(socket))


@pytest.mark.parametrize("ready_first", [True, False])
async def test_configure_returns_once_the_guest_says_configured(
    tmp_path: Path, ready_first: bool
) -> None:
    # a cold guest says ready first; a restored one said it before its snapshot
    replies = [f"{CONTROL_READY}\n".encode()] if ready_first else []
    replies.append(f"{CONTROL_CONFIGURED}\n".encode())
    received: list[bytes] = []
    server = await guest(tmp_path / "c.sock", replies, received)
    async with server:
        await configure(tmp_path / "c.sock", fields(), 5.0, lambda: True)
    await asyncio.sleep(0.05)
    assert received and received[-1] == b"end\n"


@pytest.mark.parametrize(
    ("replies", "close"),
    [
        ([b"harness-control: something else\n"], False),
        ([b"x" * 300 + b"\n"], False),
        ([], True),  # the guest closes the port without a word
    ],
)
async def test_a_guest_saying_anything_else_fails_at_once_by_name(
    tmp_path: Path, replies: list[bytes], close: bool
) -> None:
    server = await guest(tmp_path / "c.sock", replies, [], close=close)
    async with server:
        with pytest.raises(VmError) as failed:
            await configure(tmp_path / "c.sock", fields(), 5.0, lambda: True)
    assert failed.value.category == "control_failed"


async def test_no_answer_is_a_boot_timeout_and_a_dead_qemu_is_qemu_exited(
    tmp_path: Path,
) -> None:
    async def silent(reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await asyncio.start_unix_server(silent, str(tmp_path / "c.sock"))
    async with server:
        with pytest.raises(VmError) as late:
            await wait_waiting(tmp_path / "c.sock", 0.6, lambda: True)
        with pytest.raises(VmError) as dead:
            await wait_waiting(tmp_path / "c.sock", 5.0, lambda: False)
    assert (late.value.category, dead.value.category) == ("boot_timeout", "qemu_exited")
    with pytest.raises(VmError) as absent:  # no socket, and QEMU gone: do not wait
        await configure(tmp_path / "none.sock", fields(), 5.0, lambda: False)
    assert absent.value.category == "qemu_exited"


def test_the_operator_log_names_the_consoles_last_line(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    assert console_last_line(console) == ""  # unread: nothing, never a guess
    console.write_bytes(
        b"\x1bc\x1b[2JSeaBIOS\r\n" + b"x" * 400 + b"\r\nharness-init: sshd not listening\r\n\r\n"
    )
    assert console_last_line(console) == "harness-init: sshd not listening"
    console.write_bytes(b"y" * 1000)
    assert console_last_line(console) == "y" * CONSOLE_TAIL_BYTES  # bounded
