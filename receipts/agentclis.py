"""The agent CLIs a harness version runs, and the one executable each is pinned to.

Why here, in the pure library: the audit checks an agent record against this table (a
receipt that names `opencode` must name a version and an executable digest that some
harness release pinned), and the host takes its pin from here, so the writer and the
audit read one table. A pin is appended when a release moves to a new version, never
edited: older receipts name older pins and still audit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from receipts.records.agent import AgentName


@dataclass(frozen=True)
class AgentIdentity:
    """Whose code the agent is, as its record names it (receipts/records/agent.py)."""

    name: AgentName
    version: str
    """A CLI's pinned version; for `harness_loop`, the harness version."""
    sha256: str | None = None
    """A CLI's executable, as hashed in the guest; None for the harness loop."""

    @classmethod
    def harness_loop(cls, harness_version: str) -> AgentIdentity:
        return cls("harness_loop", harness_version)

    @classmethod
    def cli(cls, name: AgentName) -> AgentIdentity:
        """The current pin of a CLI (what this harness version runs)."""
        pin = current_pin(name)
        return cls(name, pin.version, pin.sha256)


@dataclass(frozen=True)
class CliPin:
    """One released executable of one agent CLI."""

    version: str
    sha256: str
    """SHA-256 of the executable itself (what the guest hashes before it runs it)."""


OPENCODE_1_18_33: Final = CliPin(
    "1.18.33", "0abbb7c32ab0294c0a7bfa2705f9ff0df5dce5ab721d1f00cccfe393f2a11427"
)
"""npm `opencode-linux-x64@1.18.33`, member `package/bin/opencode` (host/agents/opencode.py)."""

CLI_PINS: Final[dict[AgentName, tuple[CliPin, ...]]] = {"opencode": (OPENCODE_1_18_33,)}
"""Every pin a harness release has run, per CLI; the current one first."""


def current_pin(name: AgentName) -> CliPin:
    return CLI_PINS[name][0]


def pinned(name: AgentName, version: str, sha256: str | None) -> bool:
    """Whether an agent record's CLI identity is one some release pinned."""
    return any(pin == CliPin(version, sha256 or "") for pin in CLI_PINS.get(name, ()))
