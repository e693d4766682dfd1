"""The agent loop: how it ended, one record per turn and one per tool call.

A tool call record names the tool, the permission decision and the outcome category;
never the arguments' text or the tool's output.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.records.trial import Policy
from receipts.types import ByteCount, Count, Index, Millis

AgentCategory = Literal[
    "finished",
    "turn_limit",
    "tool_call_limit",
    "token_limit",
    "wall_limit",
    "invalid_output_limit",
    "script_exhausted",
    "worker_unreachable",
    "worker_error",
    "agent_crashed",
]
"""How the loop ended. The first seven are normal ends within budget; verification decides."""

AGENT_FAILURES: frozenset[str] = frozenset({"worker_unreachable", "worker_error", "agent_crashed"})

TurnKind = Literal["tool_call", "text", "invalid_tool_call", "refused"]

InvalidCallCategory = Literal[
    "unknown_tool",
    "arguments_not_json",
    "arguments_schema_violation",
    "malformed_tool_call",
    "multiple_tool_calls",
]

ToolName = Literal["read", "edit", "write", "list", "glob", "grep", "run_tests", "finish"]

ToolOutcome = Literal[
    "ok",
    "denied",
    "not_found",
    "not_unique",
    "no_change",
    "binary_file",
    "too_large",
    "jail_absolute_path",
    "jail_parent_reference",
    "jail_symlink",
    "jail_hard_link",
    "jail_special_file",
    "jail_invalid_path",
    "invalid_pattern",
    "tests_passed",
    "tests_failed",
    "tests_timeout",
    "tests_error",
    "error",
]

PermissionSource = Literal["rule", "approvals_policy"]
"""Whether the last matching rule decided, or an `ask` was resolved by the approvals policy."""


class AgentRecord(Record):
    schema_: Literal["harness.receipt.agent/1"] = Field("harness.receipt.agent/1", alias="schema")
    category: AgentCategory
    policy: Policy
    turns: Count
    tool_calls: Count
    invalid_tool_calls: Count
    prompt_tokens_total: Count
    completion_tokens_total: Count
    duration_ms: Millis


class AgentTurnRecord(Record):
    schema_: Literal["harness.receipt.agent_turn/1"] = Field(
        "harness.receipt.agent_turn/1", alias="schema"
    )
    index: Index
    request_index: Index | None
    """The worker request this turn used; None for scripted turns."""
    kind: TurnKind
    invalid_category: InvalidCallCategory | None
    prompt_tokens: Count
    completion_tokens: Count
    duration_ms: Millis


class ToolCallRecord(Record):
    schema_: Literal["harness.receipt.tool_call/1"] = Field(
        "harness.receipt.tool_call/1", alias="schema"
    )
    index: Index
    turn: Index
    tool: ToolName
    decision: Literal["allow", "deny"]
    decided_by: PermissionSource
    rule_index: Index | None
    outcome: ToolOutcome
    edit_match: Literal["exact"] | None
    output_bytes: ByteCount
    truncated: bool
    duration_ms: Millis
