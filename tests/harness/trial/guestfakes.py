"""What a guest sends back, built once for the trial tests that play the guest: a
finished command as the SSH layer reports it, the agent's record file, and guests whose
commands end as given and whose files are given bytes (no VM)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from harness.trial.guests import Guest
from host.ssh import CommandResult
from host.ssh.errors import SshError
from receipts.canonical import canonical
from receipts.recordset import RecordSet


def ended(exit_status: int | None, stdout: bytes, signal: str | None = None) -> CommandResult:
    """A guest command that ended with this status (or signal) and stdout."""
    return CommandResult(
        exit_status=exit_status,
        exit_signal=signal,
        stdout=stdout,
        stderr=b"",
        stdout_truncated=False,
        stderr_truncated=False,
        duration_ms=1,
    )


def agent_file(records: RecordSet) -> bytes:
    """The agent's record file as guest/agent/__main__.py writes it."""
    assert records.agent is not None
    return canonical(
        {
            "agent": records.agent.to_json(),
            "turns": [turn.to_json() for turn in records.agent_turns],
            "tool_calls": [call.to_json() for call in records.tool_calls],
        }
    )


class FakeVm:
    """Serves the guest's files: `get` writes the bytes set for that path, or refuses a
    file over the transfer limit as the real SSH client does."""

    def __init__(self, files: dict[str, bytes | None]) -> None:
        self.files = files

    async def put(self, local: Path, remote: str, deadline_s: float) -> None:
        return None

    async def get(self, remote: str, local: Path, deadline_s: float) -> int:
        data = self.files[remote]
        if data is None:
            raise SshError("transfer_too_large")
        local.write_bytes(data)
        return len(data)


class GuestWrote(Guest):
    """A guest whose commands all exit 0 and whose files are given bytes."""

    def __init__(self, files: dict[str, bytes | None]) -> None:
        super().__init__()
        self.handle = cast(Any, SimpleNamespace(vm=FakeVm(files)))

    async def run(
        self, command: str, deadline_s: float, stdin: bytes | None = None
    ) -> CommandResult:
        return ended(0, b"")


GATE_OK = b'HARNESS-GATE {"category":"ok","files_verified":12,"pin_table_sha256":"' + b"c" * 64
GATE_REFUSED = GATE_OK.replace(b'"ok"', b'"digest_mismatch"')

ENDS: dict[str, CommandResult | SshError] = {
    "gate_refused": ended(3, GATE_REFUSED + b'"}\n'),
    "killed_by_signal": CommandResult(None, "KILL", GATE_OK + b'"}\n', b"", False, False, 1),
    "deadline_exceeded": SshError("command_timeout"),
    "exited_nonzero": ended(1, GATE_OK + b'"}\n'),
}
"""How the gated command ends, one per category, as the SSH client reports it."""


class GuestEnded(GuestWrote):
    """A guest whose gated command (`guest.agent` / `guest.verify`) ends as given; every
    other command exits 0. The guest's files are still served, so a record the command
    may have left behind is there to be (wrongly) read."""

    def __init__(self, end: CommandResult | SshError, files: dict[str, bytes | None]) -> None:
        super().__init__(files)
        self.end = end

    async def run(
        self, command: str, deadline_s: float, stdin: bytes | None = None
    ) -> CommandResult:
        if "guest.agent" not in command and "guest.verify" not in command:
            return ended(0, b"")
        if isinstance(self.end, SshError):
            raise self.end
        return self.end
