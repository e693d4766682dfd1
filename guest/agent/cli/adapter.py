"""What the runner needs from an agent CLI: its prompt, its command, its environment
(configuration included), and its event stream read back as closed records.

Why an interface: the runner's part (verify the executable, run it as the agent's uid in
its own cgroup under the wall deadline, kill everything, read what is left) is the same
for every CLI; what differs is how a CLI is configured and what it prints. An adapter
never returns the CLI's text: only records of closed shapes (receipts/records/agent.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from receipts.records import AgentTurnRecord, ToolCallRecord
from receipts.records.agent import AgentName


@dataclass(frozen=True)
class CliSettings:
    """What the trial gives every CLI: the worker's endpoint and the model's name there,
    the output cap per request, and the budgets a CLI can be told."""

    endpoint: str
    """The worker's OpenAI-compatible base URL (…/v1 is appended by the adapter)."""
    model: str
    max_tokens: int
    context_tokens: int
    max_turns: int
    wall_deadline_s: float
    scripted: bool = False
    """The endpoint is the scripted model (scripted_model.py): turns use no worker request."""


CliEnd = Literal[
    "finished", "turn_limit", "token_limit", "worker_error", "worker_unreachable", "agent_crashed"
]
"""How a CLI's own run ended, as its event stream says (the runner adds the wall limit,
the turn cap it enforced, an unreadable stream and a breach of confinement)."""


class CliOutputInvalid(Exception):
    """The event stream is not what the pinned CLI prints: nothing of it is kept."""


@dataclass(frozen=True)
class CliTranscript:
    turns: tuple[AgentTurnRecord, ...]
    tool_calls: tuple[ToolCallRecord, ...]
    end: CliEnd


class CliAdapter(ABC):
    name: ClassVar[AgentName]
    turn_end: ClassVar[bytes]
    """What a line of the event stream holds when a turn has ended: the runner counts such
    lines as they arrive and stops the CLI at the turn budget, whatever the CLI's own
    step limit does (OpenCode 1.18.33's does not bound its compaction steps)."""

    @abstractmethod
    def prompt(self, task_prompt: str, test_command: list[str]) -> str:
        """The task as this CLI is asked it: its tools, not the loop's, run the tests."""

    @abstractmethod
    def command(self, executable: Path, prompt: str, settings: CliSettings) -> list[str]:
        """The argv that runs one task non-interactively."""

    @abstractmethod
    def environment(self, settings: CliSettings) -> dict[str, str]:
        """The CLI's whole environment, its configuration in it (nothing of the runner's is
        inherited; no file the code it runs could rewrite configures it)."""

    @abstractmethod
    def transcript(self, stream: bytes, exit_status: int, settings: CliSettings) -> CliTranscript:
        """The event stream as closed records; raises CliOutputInvalid."""
