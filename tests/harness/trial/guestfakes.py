"""What a guest sends back, built once for the trial tests that play the guest: a
finished command as the SSH layer reports it, and the agent's record file."""

from __future__ import annotations

from host.ssh import CommandResult
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
