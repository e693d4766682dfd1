"""Commands the trial runs in the guest, always through the runtime gate.

The gate's source travels on the command's stdin (`python3 -I -B -S - ARGS`), so the
check that runs first is the host's own copy, not a file on the guest's disk; its
first output line is `HARNESS-GATE {...}` with a GateCategory. How a gated command
ended, as the host reads it, is `command_failure`'s closed answer.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pydantic import ValidationError

from guest.gate import bootstrap
from harness.trial.guestrecords import GuestOutputInvalid, strict_object
from host.ssh import CommandResult
from host.ssh.errors import SshError
from receipts.records.base import Part
from receipts.records.gate import GateCategory
from receipts.records.hostreading import GuestCommandFailure
from receipts.types import Count, Sha256Hex

GATE_SOURCE = Path(bootstrap.__file__).read_bytes()
READ_ONLY = "/opt/harness-ro"
RUNTIME = f"{READ_ONLY}/runtime"
PINS = f"{READ_ONLY}/pins.json"
WORKER_RUNTIME = f"{READ_ONLY}/worker-runtime"
WORKER_PINS = f"{READ_ONLY}/worker-pins.json"
"""The guest worker's own runtime (~130 MB with numpy and llama.cpp, vs ~11 MB for the
agent's): a separate root and pin table, so the agent's and the verifier's gated
commands verify only what they import instead of re-hashing the worker's libraries."""
GATE_PREFIX = b"HARNESS-GATE "


class GateLine(Part):
    """The gate's verdict line (guest/gate/bootstrap.py `report`): closed, all three fields."""

    category: GateCategory
    files_verified: Count
    pin_table_sha256: Sha256Hex


def gated_command(
    pins_sha256: str,
    module: str,
    *args: str,
    runtime: str = RUNTIME,
    pins: str = PINS,
) -> str:
    return shlex.join(["python3", "-I", "-B", "-S", "-", runtime, pins, pins_sha256, module, *args])


def parse_gate_line(stdout: bytes) -> GateLine | None:
    """The gate's verdict from the first stdout line, or None if it never spoke or did not
    speak in strict JSON of the closed line (duplicate key, unknown category, `"12"` for
    12, an extra field): the caller records `unread`, never a guess at what was meant."""
    first = stdout.split(b"\n", 1)[0]
    if not first.startswith(GATE_PREFIX):
        return None
    payload = first[len(GATE_PREFIX) :]
    try:
        strict_object(payload)
        return GateLine.model_validate_json(payload)
    except (GuestOutputInvalid, ValidationError):
        return None


def command_failure(result: CommandResult) -> GuestCommandFailure | None:
    """How a gated command that returned ended, as the host reads it; None when it exited 0
    and the gate did not refuse (its record file is then read and judged on its own).

    A gate line that names a refusal wins over the exit status: the module never ran, so
    whatever the exit says is the gate's (it exits 3), and a file left behind is not the
    module's. Then a signal that SSH reported, then any non-zero status. The exit status
    is not read as a signal (a shell's 128+N is also a program's own exit code), and a
    gate line that is absent or unread is no refusal (a command that died before the gate
    spoke is `exited_nonzero`, which is what was seen).

    A channel that closed with neither an exit status nor a signal did not say how the
    command ended: that is the SSH channel failing (`protocol_error`, named by the VM's
    record as for any SSH failure), not evidence about the command."""
    line = parse_gate_line(result.stdout)
    if line is not None and line.category != "ok":
        return "gate_refused"
    if result.exit_signal is not None:
        return "killed_by_signal"
    if result.exit_status is None:
        raise SshError("protocol_error")
    if result.exit_status != 0:
        return "exited_nonzero"
    return None
