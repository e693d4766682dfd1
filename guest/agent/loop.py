"""The agent loop, within its budgets, leaving one record per turn and per tool call.

Every turn asks the policy for one tool call and runs it through the tool set (jail,
permissions, bounded output). An invalid call (unknown tool, arguments that are not
JSON or do not fit the schema, a malformed or multiple call) is answered with a short
fixed message and is not replayed into later prompts: the assistant message is
replaced by a placeholder. The loop ends on `finish`, on a text answer, or on the
first budget that runs out (turns, tool calls, invalid outputs, tokens, wall time),
and the category names which.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from guest.agent.policy import Message, Policy, PolicyFailure, Reply
from guest.agent.prompts import INVALID_CALL_MESSAGE, OMITTED_CALL, SYSTEM_PROMPT
from guest.task import Task
from guest.tools.registry import ToolSet
from guest.tools.result import RunTestsDetails, ToolResult
from receipts.agentclis import AgentIdentity
from receipts.records import AgentRecord, AgentTurnRecord, ToolCallRecord
from receipts.records.agent import AgentCategory, CgroupEnd, InvalidCallCategory
from receipts.totals import agent_totals

_INVALID: frozenset[str] = frozenset(get_args(InvalidCallCategory))


@dataclass(frozen=True)
class AgentLimits:
    max_turns: int
    max_tool_calls: int
    max_invalid_outputs: int
    max_total_tokens: int
    wall_deadline_s: float


@dataclass(frozen=True)
class AgentRun:
    agent: AgentRecord
    turns: tuple[AgentTurnRecord, ...]
    tool_calls: tuple[ToolCallRecord, ...]


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


class _Loop:
    def __init__(self, task: Task, tools: ToolSet, policy: Policy, limits: AgentLimits) -> None:
        self.tools, self.policy, self.limits = tools, policy, limits
        self.schemas = tools.openai_tools()
        self.messages: list[Message] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task.prompt.strip()},
        ]
        self.turns: list[AgentTurnRecord] = []
        self.calls: list[ToolCallRecord] = []
        self.invalid = 0
        self.tokens = 0

    def budget_exhausted(self, deadline: float) -> AgentCategory | None:
        limits = self.limits
        if len(self.turns) >= limits.max_turns:
            return "turn_limit"
        if len(self.calls) >= limits.max_tool_calls:
            return "tool_call_limit"
        if self.invalid >= limits.max_invalid_outputs:
            return "invalid_output_limit"
        if self.tokens >= limits.max_total_tokens:
            return "token_limit"
        if time.monotonic() >= deadline:
            return "wall_limit"
        return None

    def record_turn(
        self, reply: Reply, kind: str, invalid: InvalidCallCategory | None, started: float
    ) -> None:
        self.tokens += reply.prompt_tokens + reply.completion_tokens
        self.turns.append(
            AgentTurnRecord(
                index=len(self.turns),
                request_index=reply.request_index,
                kind=kind,
                invalid_category=invalid,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                duration_ms=_ms(started),
            )
        )

    def reject(self, reply: Reply, category: InvalidCallCategory, started: float) -> None:
        self.invalid += 1
        self.record_turn(reply, "invalid_tool_call", category, started)
        self.messages.append({"role": "assistant", "content": OMITTED_CALL})
        self.messages.append({"role": "user", "content": INVALID_CALL_MESSAGE[category]})

    def record_call(self, result: ToolResult, call_id: str, name: str, arguments: str) -> None:
        assert result.tool is not None
        permission = result.permission
        details = result.details
        run = details if isinstance(details, RunTestsDetails) else None
        self.calls.append(
            ToolCallRecord(
                index=len(self.calls),
                turn=len(self.turns) - 1,
                tool=result.tool,
                decision=permission.decision if permission else "deny",
                decided_by=permission.resolved_by if permission else "rule",
                rule_index=permission.rule_index if permission else None,
                outcome=result.outcome,
                edit_match=getattr(details, "match", None),
                run_exit=run.exit if run else None,
                net_isolation=run.net_isolation if run else None,
                cgroup_end=run.cgroup_end if run else None,
                output_bytes=result.bytes_out,
                truncated=result.truncated,
                duration_ms=result.duration_ms,
            )
        )
        function = {"name": name, "arguments": arguments}
        tool_call = {"id": call_id, "type": "function", "function": function}
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": result.output})

    async def run(self) -> AgentCategory:
        deadline = time.monotonic() + self.limits.wall_deadline_s
        while (exhausted := self.budget_exhausted(deadline)) is None:
            started = time.monotonic()
            try:
                reply = await asyncio.wait_for(
                    self.policy.reply(self.messages, self.schemas), deadline - started
                )
            except TimeoutError:
                return "wall_limit"
            except PolicyFailure as failure:
                return failure.category
            if reply.invalid is not None:
                self.reject(reply, reply.invalid, started)
                continue
            if reply.call is None:
                self.record_turn(reply, "text", None, started)
                return "finished"
            call = reply.call
            result = await asyncio.to_thread(self.tools.dispatch, call.name, call.arguments)
            if result.outcome in _INVALID:
                self.reject(reply, result.outcome, started)  # type: ignore[arg-type]
                continue
            self.record_turn(reply, "tool_call", None, started)
            self.record_call(result, f"call_{len(self.calls)}", call.name, call.arguments)
            if result.tool == "finish" and result.outcome == "ok":
                return "finished"
        return exhausted


Confinement = Callable[[], tuple[int | None, CgroupEnd]]
"""After the loop: what is left of the agent's code (guest/tools/sandbox.py `finish`):
processes of its uid (None: unread) and how its cgroup ended."""


async def run_agent(
    task: Task,
    tools: ToolSet,
    policy: Policy,
    limits: AgentLimits,
    confinement: Confinement,
    *,
    identity: AgentIdentity,
) -> AgentRun:
    """Run the loop, then read (never assume) that nothing the agent's code started is
    left: anything left, or a call whose cgroup was not shown empty, or a reading that
    failed, ends the run as `confinement_breached` whatever the loop did."""
    started = time.monotonic()
    loop = _Loop(task, tools, policy, limits)
    try:
        category: AgentCategory = await loop.run()
    except Exception:  # noqa: BLE001 - any crash of the loop itself is a closed category
        category = "agent_crashed"
    processes_left, agent_cgroup = await asyncio.to_thread(confinement)
    calls_emptied = all(call.cgroup_end in (None, "emptied") for call in loop.calls)
    if not (processes_left == 0 and agent_cgroup == "emptied" and calls_emptied):
        category = "confinement_breached"
    turns = tuple(loop.turns)
    return AgentRun(
        agent=AgentRecord(
            category=category,
            policy=policy.name,
            agent=identity.name,
            agent_version=identity.version,
            agent_sha256=identity.sha256,
            **agent_totals(turns, loop.calls),
            processes_left=processes_left,
            agent_cgroup=agent_cgroup,
            duration_ms=_ms(started),
        ),
        turns=turns,
        tool_calls=tuple(loop.calls),
    )
