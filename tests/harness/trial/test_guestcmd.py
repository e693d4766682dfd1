"""The gate's verdict line and a gated command's end as the host reads them
(harness/trial/guestcmd.py). No VM: the line is the one guest/gate/bootstrap.py
`report` prints, and damaged copies of it; the ends are CommandResults as the SSH
client builds them."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from guest.gate.bootstrap import report
from harness.trial.guestcmd import command_failure, parse_gate_line
from host.ssh.errors import SshError
from tests.harness.trial.guestfakes import ended

PINS = "ab" * 32


def _line(category: str = "ok", files: int = 12) -> bytes:
    """The first stdout line exactly as the gate writes it."""
    out = io.StringIO()
    with redirect_stdout(out):
        report(category, files, PINS)
    return out.getvalue().encode()


def test_the_gates_own_line_is_read() -> None:
    """The positive control for every refusal below."""
    line = parse_gate_line(_line() + b"agent output\n")
    assert line is not None
    assert (line.category, line.files_verified, line.pin_table_sha256) == ("ok", 12, PINS)
    refused = parse_gate_line(_line("digest_mismatch", 3))
    assert refused is not None and refused.category == "digest_mismatch"


@pytest.mark.parametrize(
    "payload",
    [
        # a refusal followed by a duplicate `ok`: json.loads would read the `ok`
        b'{"category":"digest_mismatch","category":"ok","files_verified":1,"pin_table_sha256":"'
        + PINS.encode()
        + b'"}',
        b'{"category":"ok","files_verified":NaN,"pin_table_sha256":"' + PINS.encode() + b'"}',
        # "12" for 12, 1.9 for 1, true for 1: int() would accept each
        b'{"category":"ok","files_verified":"12","pin_table_sha256":"' + PINS.encode() + b'"}',
        b'{"category":"ok","files_verified":1.9,"pin_table_sha256":"' + PINS.encode() + b'"}',
        b'{"category":"ok","files_verified":true,"pin_table_sha256":"' + PINS.encode() + b'"}',
        # a category the closed vocabulary does not have (used to crash GateRecord later)
        b'{"category":"fine","files_verified":1,"pin_table_sha256":"' + PINS.encode() + b'"}',
        b'{"category":"ok","files_verified":1,"pin_table_sha256":"not hex"}',
        b'{"category":"ok","files_verified":1,"pin_table_sha256":"'
        + PINS.encode()
        + b'","note":"x"}',
        b'["ok",1]',
        b'{"category":"ok"',
    ],
)
def test_a_line_that_is_not_the_closed_verdict_is_unread(payload: bytes) -> None:
    assert parse_gate_line(b"HARNESS-GATE " + payload + b"\n") is None


def test_no_gate_line_is_unread() -> None:
    assert parse_gate_line(b"") is None
    assert parse_gate_line(b"Traceback (most recent call last):\n" + _line()) is None


@pytest.mark.parametrize(
    ("exit_status", "stdout", "signal", "failure"),
    [
        (0, _line(), None, None),  # the positive control: the record file is read next
        (3, _line("pycache_present", 4), None, "gate_refused"),
        # a refusal with a success exit is still a refusal: the module never ran
        (0, _line("digest_mismatch", 1), None, "gate_refused"),
        (None, _line(), "KILL", "killed_by_signal"),
        (1, _line(), None, "exited_nonzero"),
        # 137 is not read as SIGKILL: a program may exit 137 by itself
        (137, _line(), None, "exited_nonzero"),
        # the gate never spoke (no python3, a crash before its line): what was seen is
        # a non-zero exit, not a guessed refusal
        (127, b"", None, "exited_nonzero"),
        (3, b"HARNESS-GATE " + b'{"category":"fine"}\n', None, "exited_nonzero"),
    ],
)
def test_a_gated_commands_end_is_named(
    exit_status: int | None, stdout: bytes, signal: str | None, failure: str | None
) -> None:
    """Mutation controls: without the gate-line check the two refusals read as
    exited_nonzero / None; without the signal check the kill raises protocol_error; with
    the exit status alone, refused-but-0 is None."""
    assert command_failure(ended(exit_status, stdout, signal)) == failure


def test_a_channel_that_says_nothing_of_the_end_is_an_ssh_failure() -> None:
    """Neither an exit status nor a signal: the channel did not report how the command
    ended, so nothing is claimed about the command (the VM's record names SSH)."""
    with pytest.raises(SshError) as info:
        command_failure(ended(None, _line()))
    assert info.value.category == "protocol_error"
