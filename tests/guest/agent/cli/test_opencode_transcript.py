"""OpenCode's event stream read back as closed records (guest/agent/cli/opencode.py).

The fixtures are real streams: `opencode run --format json` of the pinned 1.18.33, driven
by the scripted model (guest/agent/cli/scripted_model.py) with the scripts beside them,
on the host under the agent sandbox (tests/guest/agent/cli/test_run_opencode.py runs the
same). Each damaged copy below is one a reader that guessed would have turned into a
record; each is the mutation control of the check that refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guest.agent.cli.adapter import CliOutputInvalid, CliSettings, CliTranscript
from guest.agent.cli.opencode import ERRORS, OpenCode, error_outcome, tool_name

FIXTURES = Path(__file__).parent / "fixtures"
SOLUTION = (FIXTURES / "opencode-1.18.33-solution.jsonl").read_bytes()
REFUSALS = (FIXTURES / "opencode-1.18.33-refusals.jsonl").read_bytes()
OVERFLOW = (FIXTURES / "opencode-1.18.33-overflow.jsonl").read_bytes()


def _settings(*, scripted: bool = True, max_turns: int = 10) -> CliSettings:
    return CliSettings(
        endpoint="http://127.0.0.1:1",
        model="scripted",
        max_tokens=256,
        context_tokens=8192,
        max_turns=max_turns,
        wall_deadline_s=300,
        scripted=scripted,
    )


def _read(stream: bytes, status: int = 0, **settings: Any) -> CliTranscript:
    return OpenCode().transcript(stream, status, _settings(**settings))


def _events(stream: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.splitlines() if line.strip()]


def _stream(events: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(event).encode() + b"\n" for event in events)


def test_the_solution_run_reads_as_three_calls_and_an_answer() -> None:
    transcript = _read(SOLUTION)
    assert transcript.end == "finished"
    assert [t.kind for t in transcript.turns] == ["tool_call", "tool_call", "tool_call", "text"]
    assert [(c.tool, c.outcome, c.turn) for c in transcript.tool_calls] == [
        ("read", "ok", 0),
        ("edit", "ok", 1),
        ("bash", "ok", 2),
    ]
    assert all(c.output_bytes > 0 and not c.truncated for c in transcript.tool_calls)
    assert all(t.request_index is None for t in transcript.turns)  # scripted: no request
    assert all((t.prompt_tokens, t.completion_tokens) == (0, 0) for t in transcript.turns)


def test_a_model_run_names_each_turns_request_by_position() -> None:
    transcript = _read(SOLUTION, scripted=False)
    assert [t.request_index for t in transcript.turns] == [0, 1, 2, 3]


def test_refusals_are_named_as_the_harness_loop_names_them() -> None:
    """A missing file and an edit that does not match are tool calls with their outcome; a
    tool OpenCode does not offer (denied: webfetch) or does not have, and arguments of
    the wrong type, are invalid turns with no call record (as in the loop); a path
    outside the workspace is denied by OpenCode's rule."""
    transcript = _read(REFUSALS)
    assert transcript.end == "finished"
    assert [(t.kind, t.invalid_category) for t in transcript.turns] == [
        ("tool_call", None),
        ("tool_call", None),
        ("invalid_tool_call", "unknown_tool"),
        ("invalid_tool_call", "unknown_tool"),
        ("invalid_tool_call", "invalid_arguments"),
        ("tool_call", None),
        ("tool_call", None),
        ("text", None),
    ]
    calls = [(c.tool, c.outcome, c.decision, c.turn) for c in transcript.tool_calls]
    assert calls == [
        ("read", "not_found", "allow", 0),
        ("edit", "old_string_not_found", "allow", 1),
        ("read", "permission_denied", "deny", 5),
        ("bash", "ok", "allow", 6),
    ]
    assert [c.index for c in transcript.tool_calls] == [0, 1, 2, 3]


def test_how_the_run_ended() -> None:
    assert _read(SOLUTION, max_turns=4).end == "turn_limit"
    assert _read(SOLUTION, status=1).end == "agent_crashed"
    events = _events(SOLUTION)
    error = {"type": "error", "timestamp": 1, "error": {"name": "APIError", "data": {}}}
    assert _read(_stream([*events, error])).end == "worker_error"
    other = {"type": "error", "timestamp": 1, "error": {"name": "UnknownError", "data": {}}}
    assert _read(_stream([*events, error, other])).end == "agent_crashed"


def test_a_context_overflow_opencode_recovers_from_is_no_crash() -> None:
    """A real stream (SmolLM2 behind the worker, context 5,800 tokens): the worker refused
    three prompts (`ContextOverflowError`, no step) and OpenCode compacted and went on."""
    transcript = _read(OVERFLOW, scripted=False, max_turns=100)
    assert len(transcript.turns) == 11 and len(transcript.tool_calls) == 3
    assert transcript.end == "finished"
    assert _read(OVERFLOW, status=1, scripted=False, max_turns=100).end == "token_limit"
    error = {"type": "error", "timestamp": 1, "error": {"name": "UnknownError", "data": {}}}
    mixed = _stream([*_events(OVERFLOW), error])
    assert _read(mixed, scripted=False, max_turns=100).end == "agent_crashed"


def test_a_stream_cut_by_a_kill_keeps_its_finished_steps() -> None:
    """A CLI killed at the wall deadline leaves a step open: the steps that finished are
    read; a CLI that exited 0 with a step open did not print what the pinned one prints."""
    events = _events(SOLUTION)
    cut = _stream(events[:-2])  # the last step started, never finished
    assert len(_read(cut, status=-9).turns) == 3
    with pytest.raises(CliOutputInvalid):
        _read(cut, status=0)


def _first(events: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, event in enumerate(events) if event["type"] == kind)


def _damaged(damage: str) -> bytes:
    events = _events(SOLUTION)
    use = _first(events, "tool_use")
    if damage == "not_json":
        return SOLUTION + b"{not json\n"
    if damage == "not_an_object":
        return SOLUTION + b"[1]\n"
    if damage == "no_type":
        return _stream([*events, {"timestamp": 1}])
    if damage == "unknown_type":
        return _stream([*events, {"type": "surprise", "timestamp": 1}])
    if damage == "two_calls_in_a_step":
        events.insert(use, events[use])
    elif damage == "call_outside_a_step":
        events.insert(0, events[use])
    elif damage == "step_inside_a_step":
        events.insert(1, events[0])
    elif damage == "finish_without_start":
        events.insert(0, events[_first(events, "step_finish")])
    elif damage == "negative_tokens":
        finish = events[_first(events, "step_finish")]
        finish["part"]["tokens"]["input"] = -1
    elif damage == "boolean_count":
        finish = events[_first(events, "step_finish")]
        finish["part"]["tokens"]["output"] = True
    elif damage == "call_neither_completed_nor_failed":
        events[use]["part"]["state"]["status"] = "running"
    elif damage == "completed_without_output":
        del events[use]["part"]["state"]["output"]
    elif damage == "no_times":
        del events[use]["part"]["state"]["time"]
    return _stream(events)


@pytest.mark.parametrize(
    "damage",
    [
        "not_json",
        "not_an_object",
        "no_type",
        "unknown_type",
        "two_calls_in_a_step",
        "call_outside_a_step",
        "step_inside_a_step",
        "finish_without_start",
        "negative_tokens",
        "boolean_count",
        "call_neither_completed_nor_failed",
        "completed_without_output",
        "no_times",
    ],
)
def test_a_stream_the_pinned_cli_does_not_print_is_refused_whole(damage: str) -> None:
    with pytest.raises(CliOutputInvalid):
        _read(_damaged(damage))


def test_names_and_errors_map_to_closed_values() -> None:
    assert tool_name("bash") == "bash"
    assert tool_name("Bash") == tool_name("mcp_x") == tool_name(7) == "unrecognized"
    assert tool_name("unrecognized") == "unrecognized"
    for prefix, outcome in ERRORS:
        assert error_outcome(f"{prefix} and the rest of the message") == outcome
    assert error_outcome("something else entirely") == "cli_tool_error"
    assert error_outcome(None) == "cli_tool_error"


def test_the_config_confines_opencode_to_the_endpoint_and_the_workspace() -> None:
    """OpenCode is configured by its environment alone: its one provider is the endpoint,
    tools that reach past the workspace or the guest are denied, and every source of
    configuration or code the workspace could hold is switched off."""
    env = OpenCode().environment(_settings())
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    assert config["provider"]["harness"]["options"]["baseURL"] == "http://127.0.0.1:1/v1"
    assert config["model"] == "harness/scripted"
    permission = config["permission"]
    assert permission["*"] == "allow"
    for denied in ("external_directory", "webfetch", "websearch", "task", "question"):
        assert permission[denied] == "deny"
    assert config["agent"]["build"] == {"steps": 10, "temperature": 0}
    for switch in ("PROJECT_CONFIG", "DEFAULT_PLUGINS", "MODELS_FETCH", "CLAUDE_CODE"):
        assert env[f"OPENCODE_DISABLE_{switch}"] == "1"
    assert "OPENCODE_CONFIG" not in env and env["HOME"].startswith("/tmp/")


def test_the_prompt_names_the_test_command() -> None:
    prompt = OpenCode().prompt("Fix it.\n", ["python3", "-m", "pytest", "-q", "a b"])
    assert prompt.startswith("Fix it.\n\n")
    assert "`python3 -m pytest -q 'a b'`" in prompt
