"""The gate's verdict line as the host reads it (harness/trial/guestcmd.py). No VM: the
line is the one guest/gate/bootstrap.py `report` prints, and damaged copies of it."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from guest.gate.bootstrap import report
from harness.trial.guestcmd import parse_gate_line

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
