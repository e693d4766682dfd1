"""Commands the trial runs in the guest, always through the runtime gate.

The gate's source travels on the command's stdin (`python3 -I -B -S - ARGS`), so the
check that runs first is the host's own copy, not a file on the guest's disk; its
first output line is `HARNESS-GATE {...}` with a GateCategory.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from guest.gate import bootstrap

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


@dataclass(frozen=True)
class GateLine:
    category: str
    files_verified: int
    pin_table_sha256: str


def gated_command(
    pins_sha256: str,
    module: str,
    *args: str,
    runtime: str = RUNTIME,
    pins: str = PINS,
) -> str:
    return shlex.join(["python3", "-I", "-B", "-S", "-", runtime, pins, pins_sha256, module, *args])


def parse_gate_line(stdout: bytes) -> GateLine | None:
    """The gate's verdict from the first stdout line, or None if it never spoke."""
    first = stdout.split(b"\n", 1)[0]
    if not first.startswith(GATE_PREFIX):
        return None
    try:
        value = json.loads(first[len(GATE_PREFIX) :])
        return GateLine(
            str(value["category"]), int(value["files_verified"]), str(value["pin_table_sha256"])
        )
    except (ValueError, KeyError, TypeError):
        return None
