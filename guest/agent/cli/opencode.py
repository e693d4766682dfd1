"""OpenCode (1.18.33, pinned by host/agents/opencode.py) as the agent.

Configured offline, for our worker only: one `@ai-sdk/openai-compatible` provider whose
base URL is the worker's, every permission `allow` except the tools that would reach
past the workspace or the guest (`external_directory`, web, sub-agents, questions),
which are `deny` (denied tools are not offered to the model, so the prompt is smaller
too); greedy sampling and `steps` = the profile's turn budget through its `build`
agent. `opencode run --format json` prints one JSON event per line (FIELD-NOTES:
`step_start`, `tool_use`, `text`, `reasoning`, `step_finish`, `error`); the transcript
reads them as closed records and keeps none of their text.

What maps to what:
- a step (between `step_start` and `step_finish`) is one turn and one worker request: its
  `request_index` is its position (`--title` is given, so OpenCode asks for no title and
  its only requests are its steps); the audit checks each turn's tokens against that
  request's record, so a shifted mapping is a finding, not a silent error;
- a `tool_use` is one tool call: OpenCode's tool name (tools the record has no name for
  are `unrecognized`), `completed` is `ok`, an error is named by ERRORS (OpenCode
  1.18.33's messages) or is `cli_tool_error`; a denial by its rules is
  `permission_denied` with decision `deny`. Which of its rules matched, OpenCode does
  not report (`rule_index` None). A step with more than one call cannot come from our
  worker (its grammar allows one call per answer): the stream is `cli_output_invalid`.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, ClassVar, get_args

from guest.agent.cli.adapter import (
    CliAdapter,
    CliEnd,
    CliOutputInvalid,
    CliSettings,
    CliTranscript,
)
from receipts.records import AgentTurnRecord, ToolCallRecord
from receipts.records.agent import AgentName, InvalidCallCategory, ToolName, ToolOutcome

PROVIDER = "harness"
HOME = "/tmp/opencode-home"
"""In the agent's private /tmp (a fresh tmpfs per run): OpenCode's state dies with it."""

OFF_SWITCHES = (
    "OPENCODE_DISABLE_PROJECT_CONFIG",
    "OPENCODE_DISABLE_CLAUDE_CODE",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_SHARE",
)
"""Everything that would read configuration the workspace (the agent's code) can write,
load code from elsewhere, or reach past the endpoint: the configuration comes in
`OPENCODE_CONFIG_CONTENT` only."""

DENIED = (
    "external_directory",
    "webfetch",
    "websearch",
    "codesearch",
    "task",
    "skill",
    "todowrite",
    "todoread",
    "question",
    "lsp",
)

ERRORS: tuple[tuple[str, ToolOutcome], ...] = (
    ("Could not find oldString in the file", "old_string_not_found"),
    ("Found multiple matches for oldString", "multiple_matches"),
    ("No changes to apply: oldString and newString are identical", "old_string_equals_new_string"),
    ("oldString cannot be empty", "empty_old_string"),
    ("File not found:", "not_found"),
    ("The user has specified a rule which prevents you", "permission_denied"),
    ("tool was called with invalid arguments", "invalid_arguments"),
    ("Model tried to call unavailable tool", "unknown_tool"),
    ("Unknown tool:", "unknown_tool"),
)
"""OpenCode 1.18.33's tool errors, by the start of their message (checked against the
pinned binary's strings); anything else is `cli_tool_error`."""


def _literal_values(literal: object) -> frozenset[str]:
    """Every string a (possibly nested) Literal admits."""
    values: set[str] = set()
    for arg in get_args(literal):
        values.update(_literal_values(arg) if get_args(arg) else {arg})
    return frozenset(values)


_TOOL_NAMES: frozenset[str] = _literal_values(ToolName)
_INVALID: frozenset[str] = _literal_values(InvalidCallCategory)
"""Outcomes the harness loop records as an invalid call (a turn, not a tool call)."""


def tool_name(reported: object) -> ToolName:
    if isinstance(reported, str) and reported in _TOOL_NAMES and reported != "unrecognized":
        return reported  # type: ignore[return-value]
    return "unrecognized"


def error_outcome(message: object) -> ToolOutcome:
    if isinstance(message, str):
        for prefix, outcome in ERRORS:
            if prefix in message:
                return outcome
    return "cli_tool_error"


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CliOutputInvalid("not a count")
    return value


def _obj(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CliOutputInvalid("not an object")
    return value


def _events(stream: bytes) -> list[dict[str, Any]]:
    events = []
    for line in stream.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            raise CliOutputInvalid("not JSON lines") from None
        event = _obj(event)
        if not isinstance(event.get("type"), str):
            raise CliOutputInvalid("an event without a type")
        events.append(event)
    return events


RECOVERED = frozenset({"ContextOverflowError"})
"""Errors OpenCode 1.18.33 prints and goes on from: the worker refused a prompt longer
than the context (`context_length_exceeded`, no step), and OpenCode compacts the session
and asks again. A run that then ends normally ended normally; one that exits non-zero
after them ran out of context (`token_limit`)."""


class _Reader:
    """Folds the events into turns and calls, one step at a time."""

    def __init__(self, scripted: bool) -> None:
        self.scripted = scripted
        self.turns: list[AgentTurnRecord] = []
        self.calls: list[ToolCallRecord] = []
        self.step_started: int | None = None
        self.step_calls: list[ToolCallRecord] = []
        self.errors: list[dict[str, Any]] = []

    def event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "step_start":
            if self.step_started is not None:
                raise CliOutputInvalid("a step inside a step")
            self.step_started = _int(event.get("timestamp"))
            self.step_calls = []
        elif kind == "tool_use":
            if self.step_started is None:
                raise CliOutputInvalid("a tool call outside a step")
            if self.step_calls:
                raise CliOutputInvalid("two calls in one answer")
            self.step_calls.append(self._call(_obj(event.get("part"))))
        elif kind == "step_finish":
            self._finish(event)
        elif kind == "error":
            self.errors.append(_obj(event.get("error")))
        elif kind not in ("text", "reasoning"):
            raise CliOutputInvalid("an event of an unknown type")

    def _call(self, part: dict[str, Any]) -> ToolCallRecord:
        state = _obj(part.get("state"))
        status = state.get("status")
        times = _obj(state.get("time"))
        duration = max(0, _int(times.get("end")) - _int(times.get("start")))
        metadata = state.get("metadata")
        tool = tool_name(part.get("tool"))
        if part.get("tool") == "invalid":
            # OpenCode routes a call it cannot use (a tool it does not offer, arguments it
            # cannot repair) to its `invalid` tool, which "completes": the call named in
            # its input is what the model asked for, and it was unusable.
            asked = _obj(state.get("input"))
            tool = tool_name(asked.get("tool"))
            refused = error_outcome(asked.get("error"))
            return self._record(
                tool,
                "invalid_arguments" if refused == "cli_tool_error" else refused,
                0,
                False,
                duration,
            )
        if status == "completed":
            output = state.get("output")
            if not isinstance(output, str):
                raise CliOutputInvalid("a completed call without output")
            outcome: ToolOutcome = "ok"
            output_bytes = len(output.encode("utf-8", "surrogatepass"))
        elif status == "error":
            outcome = error_outcome(state.get("error"))
            output_bytes = 0
        else:
            raise CliOutputInvalid("a call neither completed nor failed")
        truncated = isinstance(metadata, dict) and metadata.get("truncated") is True
        return self._record(tool, outcome, output_bytes, truncated, duration)

    def _record(
        self, tool: ToolName, outcome: ToolOutcome, output_bytes: int, truncated: bool, ms: int
    ) -> ToolCallRecord:
        return ToolCallRecord(
            index=len(self.calls),
            turn=len(self.turns),
            tool=tool,
            decision="deny" if outcome == "permission_denied" else "allow",
            decided_by="rule",
            rule_index=None,
            outcome=outcome,
            edit_match=None,
            run_exit=None,
            net_isolation=None,
            cgroup_end=None,
            output_bytes=output_bytes,
            truncated=truncated,
            duration_ms=ms,
        )

    def _finish(self, event: dict[str, Any]) -> None:
        if self.step_started is None:
            raise CliOutputInvalid("a step finished that did not start")
        tokens = _obj(_obj(event.get("part")).get("tokens"))
        cache = _obj(tokens.get("cache"))
        index = len(self.turns)
        invalid = next((c.outcome for c in self.step_calls if c.outcome in _INVALID), None)
        if invalid is not None:  # as the harness loop records it: a turn, no call record
            self.step_calls = []
        self.turns.append(
            AgentTurnRecord(
                index=index,
                request_index=None if self.scripted else index,
                kind="invalid_tool_call" if invalid else "tool_call" if self.step_calls else "text",
                invalid_category=invalid,
                prompt_tokens=_int(tokens.get("input")) + _int(cache.get("read")),
                completion_tokens=_int(tokens.get("output")) + _int(tokens.get("reasoning")),
                duration_ms=max(0, _int(event.get("timestamp")) - self.step_started),
            )
        )
        self.calls.extend(self.step_calls)
        self.step_started = None
        self.step_calls = []

    def end(self, exit_status: int, max_turns: int) -> CliEnd:
        names = {str(error.get("name")) for error in self.errors} - RECOVERED
        if names:
            return "worker_error" if names <= {"APIError"} else "agent_crashed"
        if exit_status != 0:
            return "token_limit" if self.errors else "agent_crashed"
        return "turn_limit" if len(self.turns) >= max_turns else "finished"


class OpenCode(CliAdapter):
    name: ClassVar[AgentName] = "opencode"
    turn_end: ClassVar[bytes] = b'{"type":"step_finish",'
    """How every `step_finish` line of 1.18.33 begins (JSON.stringify, `type` first); a
    model's text cannot hold it (its quotes are escaped inside a string)."""

    def prompt(self, task_prompt: str, test_command: list[str]) -> str:
        return (
            f"{task_prompt.strip()}\n\nIn this session the tools are OpenCode's: there is no "
            "run_tests or finish tool. Run the tests with the bash tool: "
            f"`{shlex.join(test_command)}`. When you are done, answer in text."
        )

    def config(self, settings: CliSettings) -> dict[str, Any]:
        """OpenCode's configuration: our worker (or the scripted model) as its only
        provider, its permissions, greedy sampling and the turn budget as `steps`."""
        return {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": PROVIDER,
                    "options": {"baseURL": f"{settings.endpoint}/v1", "apiKey": "unused"},
                    "models": {
                        settings.model: {
                            "name": settings.model,
                            "temperature": True,
                            "tool_call": True,
                            "limit": {
                                "context": settings.context_tokens,
                                "output": settings.max_tokens,
                            },
                        }
                    },
                }
            },
            "model": f"{PROVIDER}/{settings.model}",
            "permission": {"*": "allow", **dict.fromkeys(DENIED, "deny")},
            "agent": {"build": {"temperature": 0, "steps": settings.max_turns}},
            "autoupdate": False,
            "share": "disabled",
        }

    def command(self, executable: Path, prompt: str, settings: CliSettings) -> list[str]:
        return [str(executable), "run", "--format", "json", "--title", "harness",
                "-m", f"{PROVIDER}/{settings.model}", prompt]  # fmt: skip

    def environment(self, settings: CliSettings) -> dict[str, str]:
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": HOME,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "OPENCODE_CONFIG_CONTENT": json.dumps(self.config(settings), sort_keys=True),
            **dict.fromkeys(OFF_SWITCHES, "1"),
            "npm_config_offline": "true",
        }

    def transcript(self, stream: bytes, exit_status: int, settings: CliSettings) -> CliTranscript:
        reader = _Reader(settings.scripted)
        for event in _events(stream):
            reader.event(event)
        if reader.step_started is not None and exit_status == 0:
            raise CliOutputInvalid("a step that never finished")
        return CliTranscript(
            tuple(reader.turns), tuple(reader.calls), reader.end(exit_status, settings.max_turns)
        )
