"""The agent loop with the scripted policy and with a model endpoint over real HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from guest.agent.loop import AgentLimits, AgentRun, run_agent
from guest.agent.policy import ModelPolicy, Policy, ProposedCall, ScriptedPolicy
from guest.task import task_digest
from guest.tools.permissions import PermissionRule
from guest.tools.registry import ToolSet
from guest.tools.sandbox import finish
from guest.verify.run import verify
from tests.guest.agent.identity import HARNESS_LOOP
from tests.guest.support_sandbox import host_sandbox
from tests.guest.support_tasks import TASK_IDS, TASKS, scratch, task_copy

__all__ = ["scratch"]

LIMITS = AgentLimits(
    max_turns=20,
    max_tool_calls=20,
    max_invalid_outputs=3,
    max_total_tokens=100_000,
    wall_deadline_s=120,
)


def _run(
    task_id: str,
    workspace_scratch: Path,
    policy: Policy,
    limits: AgentLimits = LIMITS,
    *,
    rules: tuple[PermissionRule, ...] = (),
) -> AgentRun:
    task, _task_dir, workspace = task_copy(task_id, workspace_scratch)
    with (
        host_sandbox(workspace) as sandbox,
        ToolSet(
            workspace, list(task.tests.command), rules, "approve_all", sandbox=sandbox
        ) as tools,
    ):
        return asyncio.run(
            run_agent(task, tools, policy, limits, lambda: finish(sandbox), identity=HARNESS_LOOP)
        )


@pytest.mark.parametrize("task_id", TASK_IDS)
@pytest.mark.parametrize(("script", "result"), [("solution", "passed"), ("wrong", "failed")])
def test_scripted_policy_reaches_the_expected_verification(
    task_id: str, script: str, result: str, scratch: Path
) -> None:
    task, task_dir, workspace = task_copy(task_id, scratch)
    policy = ScriptedPolicy.from_file(task_dir / "scripts" / f"{script}.json")
    with (
        host_sandbox(workspace) as sandbox,
        ToolSet(workspace, list(task.tests.command), [], "approve_all", sandbox=sandbox) as tools,
    ):
        run = asyncio.run(
            run_agent(task, tools, policy, LIMITS, lambda: finish(sandbox), identity=HARNESS_LOOP)
        )
    assert run.agent.category == "finished"
    assert run.agent.policy == "scripted"
    assert all(turn.request_index is None for turn in run.turns)
    assert [call.outcome for call in run.tool_calls] == ["ok"] * len(run.tool_calls)
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert (record.category, record.result) == ("ok", result)
    assert not record.fixture_changed


def test_records_count_what_happened(scratch: Path) -> None:
    policy = ScriptedPolicy.from_file(TASKS / "py-one-line-fix" / "scripts" / "solution.json")
    run = _run("py-one-line-fix", scratch, policy)
    assert run.agent.turns == len(run.turns) == 4
    assert run.agent.tool_calls == len(run.tool_calls) == 4
    assert [call.tool for call in run.tool_calls] == ["read", "edit", "run_tests", "finish"]
    assert [call.turn for call in run.tool_calls] == [0, 1, 2, 3]
    assert run.tool_calls[1].edit_match == "exact"
    assert run.tool_calls[2].run_exit == "passed"
    assert run.tool_calls[2].net_isolation == "applied"
    assert run.tool_calls[2].cgroup_end == "emptied"
    assert [call.cgroup_end for call in run.tool_calls] == [None, None, "emptied", None]
    assert (run.agent.processes_left, run.agent.agent_cgroup) == (0, "emptied")


def _steps(*steps: tuple[str, str]) -> ScriptedPolicy:
    return ScriptedPolicy([ProposedCall(name, arguments) for name, arguments in steps])


class RecordingPolicy:
    """Wraps a policy and keeps every message list it was shown."""

    name = "scripted"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.seen: list[str] = []

    async def reply(self, messages: Any, tools: Any) -> Any:
        self.seen.append(json.dumps(messages))
        return await self.inner.reply(messages, tools)


def test_invalid_json_repeatedly_ends_within_limits_and_is_never_replayed(scratch: Path) -> None:
    garbage = '{"filePath": "stats.py", BROKEN-JSON-MARKER'
    policy = RecordingPolicy(_steps(*[("read", garbage)] * 10))
    run = _run("py-one-line-fix", scratch, policy)  # type: ignore[arg-type]
    assert run.agent.category == "invalid_output_limit"
    assert run.agent.turns == LIMITS.max_invalid_outputs
    assert run.agent.invalid_tool_calls == 3
    assert {turn.invalid_category for turn in run.turns} == {"invalid_json"}
    assert run.tool_calls == ()
    assert all("BROKEN-JSON-MARKER" not in seen for seen in policy.seen)


@pytest.mark.parametrize(
    ("steps", "category"),
    [
        ([("delete_everything", "{}")], "unknown_tool"),
        ([("read", '{"filePath": "stats.py", "bogus": 1}')], "invalid_arguments"),
        ([("read", '{"filePath": "a", "filePath": "b"}')], "duplicate_key"),
        ([("read", "[1, 2]")], "not_an_object"),
    ],
)
def test_each_invalid_call_has_its_category(
    scratch: Path, steps: list[tuple[str, str]], category: str
) -> None:
    run = _run("py-one-line-fix", scratch, _steps(*steps))
    assert run.turns[0].kind == "invalid_tool_call"
    assert run.turns[0].invalid_category == category
    assert run.agent.category == "script_exhausted"


@pytest.mark.parametrize(
    ("limits", "category"),
    [
        (AgentLimits(2, 20, 3, 100_000, 120), "turn_limit"),
        (AgentLimits(20, 1, 3, 100_000, 120), "tool_call_limit"),
    ],
)
def test_budgets_end_the_loop_with_their_category(
    scratch: Path, limits: AgentLimits, category: str
) -> None:
    run = _run("py-one-line-fix", scratch, _steps(*[("list", "{}")] * 5), limits)
    assert run.agent.category == category


def test_wall_deadline_ends_a_slow_policy(scratch: Path) -> None:
    class Slow:
        name = "scripted"

        async def reply(self, messages: Any, tools: Any) -> Any:
            await asyncio.sleep(30)

    run = _run("py-one-line-fix", scratch, Slow(), AgentLimits(20, 20, 3, 100_000, 0.5))  # type: ignore[arg-type]
    assert run.agent.category == "wall_limit"


def test_denied_calls_are_recorded_and_do_not_run(scratch: Path) -> None:
    rules = (PermissionRule(tool="edit", action="deny"),)
    policy = ScriptedPolicy.from_file(TASKS / "py-one-line-fix" / "scripts" / "solution.json")
    run = _run("py-one-line-fix", scratch, policy, rules=rules)
    edit = run.tool_calls[1]
    assert (edit.tool, edit.decision, edit.outcome, edit.rule_index) == (
        "edit",
        "deny",
        "permission_denied",
        0,
    )
    assert "range(len(values) - width)]" in (scratch / "workspace" / "stats.py").read_text()


# --- a model endpoint over real HTTP -------------------------------------------------

Responder = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[dict[str, Any]], list[Responder]]]:
    received: list[dict[str, Any]] = []
    responders: list[Responder] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(body)
            status, payload = responders[min(len(received), len(responders)) - 1](body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received, responders
    server.shutdown()
    server.server_close()


def _completion(
    message: dict[str, Any], prompt: int = 50, completion: int = 7
) -> tuple[int, dict[str, Any]]:
    return 200, {
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def _tool(name: str, arguments: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": arguments}
    call = {"id": "x", "type": "function", "function": function}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _model(url: str) -> ModelPolicy:
    return ModelPolicy(url, "tiny", max_tokens=64, temperature=0.0, seed=1, request_timeout_s=10)


def test_model_invalid_json_is_not_replayed_to_the_endpoint(
    scratch: Path, endpoint: tuple[str, list[dict[str, Any]], list[Responder]]
) -> None:
    url, received, responders = endpoint
    responders.append(lambda _body: _completion(_tool("read", '{"filePath": NOT-JSON-MARKER')))
    run = _run("py-one-line-fix", scratch, _model(url))
    assert run.agent.category == "invalid_output_limit"
    assert len(received) == 3
    assert all("NOT-JSON-MARKER" not in json.dumps(body["messages"]) for body in received)
    assert [turn.request_index for turn in run.turns] == [0, 1, 2]
    assert run.agent.prompt_tokens_total == 150


@pytest.mark.parametrize(
    ("message", "category"),
    [
        (_tool("read", {"filePath": "stats.py"}), "malformed_tool_call"),
        (
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "list", "arguments": "{}"},
                    },
                    {
                        "id": "b",
                        "type": "function",
                        "function": {"name": "list", "arguments": "{}"},
                    },
                ],
            },
            "multiple_tool_calls",
        ),
    ],
)
def test_model_malformed_calls_are_named(
    scratch: Path,
    endpoint: tuple[str, list[dict[str, Any]], list[Responder]],
    message: dict[str, Any],
    category: str,
) -> None:
    url, _received, responders = endpoint
    responders.append(lambda _body: _completion(message))
    run = _run("py-one-line-fix", scratch, _model(url))
    assert run.turns[0].invalid_category == category


def test_model_tool_call_then_text_answer(
    scratch: Path, endpoint: tuple[str, list[dict[str, Any]], list[Responder]]
) -> None:
    url, received, responders = endpoint
    responders.append(lambda _body: _completion(_tool("read", '{"filePath": "stats.py"}')))
    responders.append(lambda _body: _completion({"role": "assistant", "content": "Done."}))
    run = _run("py-one-line-fix", scratch, _model(url))
    assert run.agent.category == "finished"
    assert [turn.kind for turn in run.turns] == ["tool_call", "text"]
    assert received[1]["messages"][-1]["role"] == "tool"
    assert "moving_sum" in received[1]["messages"][-1]["content"]


def test_token_budget(
    scratch: Path, endpoint: tuple[str, list[dict[str, Any]], list[Responder]]
) -> None:
    url, _received, responders = endpoint
    responders.append(
        lambda _body: _completion(_tool("list", "{}"), prompt=60_000, completion=50_000)
    )
    assert _run("py-one-line-fix", scratch, _model(url)).agent.category == "token_limit"


@pytest.mark.parametrize(
    ("status", "payload", "category"),
    [
        (500, {"error": {"code": "internal"}}, "worker_error"),
        (200, {"choices": [{"message": {"role": "assistant", "content": "x"}}]}, "worker_error"),
    ],
)
def test_endpoint_errors_are_named(
    scratch: Path,
    endpoint: tuple[str, list[dict[str, Any]], list[Responder]],
    status: int,
    payload: dict[str, Any],
    category: str,
) -> None:
    url, _received, responders = endpoint
    responders.append(lambda _body: (status, payload))
    assert _run("py-one-line-fix", scratch, _model(url)).agent.category == category


def test_unreachable_endpoint(scratch: Path) -> None:
    run = _run("py-one-line-fix", scratch, _model("http://127.0.0.1:9"))
    assert run.agent.category == "worker_unreachable"
