"""The agent loop: how it ended, one record per turn and one per tool call.

A tool call record names the tool, the permission decision and the outcome category;
never the arguments' text or the tool's output.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from receipts.records.base import Record
from receipts.records.hostreading import HOST_READINGS, HostReading
from receipts.records.trial import Policy
from receipts.types import ByteCount, Count, Index, Millis, Sha256Hex, Version

AgentCategoryV1 = Literal[
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
    HostReading,
]
"""How the loop ended, as agent/1 recorded it (read by the audit only)."""

AgentCategoryV2 = Literal[AgentCategoryV1, "confinement_breached"]
"""How the loop ended, as agent/2 recorded it (read by the audit only)."""

AgentCategory = Literal[AgentCategoryV2, "cli_output_invalid"]
"""How the loop ended. The first seven are normal ends within budget; verification decides.
The host readings (receipts/records/hostreading.py) are the host's, not the guest's: the
agent's record file was not strict JSON of its closed shape (`records_invalid`), or the
agent's command ended without writing one it could trust (`gate_refused`,
`killed_by_signal`, `deadline_exceeded`, `exited_nonzero`); nothing of the file was kept
and every count is 0 because nothing was read, not because nothing happened.
`confinement_breached`: code the agent ran outlived its tool call (a call's cgroup was
not shown empty, or a process of the agent's uid or its cgroup was left at the end);
whatever the loop did, its workspace is not evidence. `cli_output_invalid` (agent/3): an
agent CLI ended without an event stream its adapter could read as closed records (cut at
its cap, not JSON lines, an event of an unknown shape); nothing of it was kept."""

AgentName = Literal["harness_loop", "opencode"]
"""Whose code ran the agent: the harness's own loop (guest/agent/loop.py), or a pinned
agent CLI through its adapter (guest/agent/cli/)."""

AGENT_FAILURES: frozenset[str] = frozenset(
    {
        "worker_unreachable",
        "worker_error",
        "agent_crashed",
        "confinement_breached",
        "cli_output_invalid",
        *HOST_READINGS,
    }
)

CgroupEnd = Literal["emptied", "not_emptied", "unread"]
"""How a cgroup of agent-run code ended, read by root in the guest: `emptied` when it was
killed (`cgroup.kill`), `cgroup.events` read `populated 0`, `cgroup.procs` read empty
and it was removed; `not_emptied` when a member was still there at the deadline;
`unread` when a read or write of the cgroup failed."""

TurnKind = Literal["tool_call", "text", "invalid_tool_call", "refused"]

LoopToolName = Literal["read", "edit", "write", "list", "glob", "grep", "run_tests", "finish"]
"""The harness loop's tools: every tool a tool_call/1 to /3 record could name."""

CliToolName = Literal[
    "bash",
    "task",
    "todowrite",
    "todoread",
    "webfetch",
    "websearch",
    "codesearch",
    "skill",
    "patch",
    "apply_patch",
    "lsp",
    "batch",
    "question",
    "invalid",
    "unrecognized",
]
"""The other tools OpenCode 1.18.33 can report (tool_call/4): its `invalid` is the call it
could not route to a tool; `unrecognized` is a name this list does not have."""

ToolName = Literal[LoopToolName, CliToolName]

JailRefusal = Literal[
    "absolute_path",
    "parent_component",
    "nul_byte",
    "control_character",
    "line_separator",
    "bidi_control",
    "invalid_encoding",
    "path_too_long",
    "symlink",
    "special_file",
    "hard_link",
    "cross_device",
    "not_found",
    "not_a_directory",
    "is_a_directory",
    "path_changed",
    "os_denied",
    "os_error",
]
"""Refusals from resolving a model-supplied path inside the workspace."""

ToolRefusal = Literal[
    "binary_file",
    "file_too_large",
    "content_too_large",
    "empty_old_string",
    "old_string_equals_new_string",
    "old_string_not_found",
    "multiple_matches",
    "file_not_read",
    "invalid_pattern",
    "pattern_too_long",
    "spawn_failed",
    "net_isolation_unavailable",
    "deadline_exceeded",
]
"""Refusals and failures specific to one tool's semantics. `file_not_read` (tool_call/3): an
edit of a file this session has not read, refused as OpenCode's edit tool refuses it."""

DispatchRefusal = Literal[
    "unknown_tool",
    "arguments_too_large",
    "invalid_json",
    "duplicate_key",
    "non_finite_number",
    "not_an_object",
    "invalid_arguments",
    "permission_denied",
]
"""Refusals before any tool runs: the call itself is unusable or not permitted."""

LoopToolOutcome = Literal["ok", JailRefusal, ToolRefusal, DispatchRefusal]
"""A tool call's outcome up to tool_call/3 (the harness loop's only)."""

ToolOutcome = Literal[LoopToolOutcome, "cli_tool_error"]
"""`cli_tool_error` (tool_call/4): an agent CLI's tool reported an error its adapter's
table does not name (guest/agent/cli/opencode.py); the error's text is not kept."""

InvalidCallCategory = Literal[
    "unknown_tool",
    "arguments_too_large",
    "invalid_json",
    "duplicate_key",
    "non_finite_number",
    "not_an_object",
    "invalid_arguments",
    "malformed_tool_call",
    "multiple_tool_calls",
]
"""Why a turn's tool call could not be dispatched at all (it is not a tool call record)."""

EditMatch = Literal["exact"]
"""How an edit located its target; fuzzy replacers would add values here."""

RunExit = Literal["passed", "failed", "deadline", "cpu_limit", "file_size_limit", "signaled"]
"""How a `run_tests` command ended."""

NetIsolation = Literal["applied", "unread", "not_applied"]
"""Whether `run_tests` ran without a network, as read back by the child (three answers)."""

NetMechanism = Literal["unshare_syscall", "unshare_binary", "none"]
NetPolicy = Literal["required", "best_effort", "disabled"]

PermissionAction = Literal["allow", "ask", "deny"]
PermissionVerdict = Literal["allow", "deny"]
ApprovalsPolicy = Literal["approve_all", "deny_all", "approve_read_only"]
"""How a permission rule's `ask` is answered when nobody is there to ask."""

PermissionSource = Literal["rule", "approvals_policy"]
"""Whether the last matching rule decided, or an `ask` was resolved by the approvals policy."""


class AgentRecord(Record):
    """`agent/3`: agent/2 and whose code was the agent (`agent`, `agent_version`, and for a
    CLI the SHA-256 of the executable the guest checked before it ran it)."""

    schema_: Literal["harness.receipt.agent/3"] = Field("harness.receipt.agent/3", alias="schema")
    category: AgentCategory
    policy: Policy
    agent: AgentName
    agent_version: Version
    """The CLI's pinned version; for `harness_loop`, the harness version (the trial
    record's `harness_version`: the audit checks they agree)."""
    agent_sha256: Sha256Hex | None
    """A CLI's executable, hashed in the guest before it ran; None for `harness_loop`, whose
    code the runtime gate's pin table covers."""
    turns: Count
    tool_calls: Count
    invalid_tool_calls: Count
    prompt_tokens_total: Count
    completion_tokens_total: Count
    processes_left: Count | None
    """Processes of the agent's uid alive after the loop ended and every call's cgroup was
    killed, counted by root over /proc; None when unread (or a host reading)."""
    agent_cgroup: CgroupEnd
    """The agent's parent cgroup (every call's cgroup inside it) at the end."""
    duration_ms: Millis

    @model_validator(mode="after")
    def _a_cli_names_its_executable(self) -> AgentRecord:
        if (self.agent_sha256 is None) != (self.agent == "harness_loop"):
            raise ValueError("agent_sha256 is present exactly for an agent CLI")
        return self

    @model_validator(mode="after")
    def _survivors_are_a_breach(self) -> AgentRecord:
        """A record that reports anything left of the agent's code (or could not look)
        names the breach: it cannot also claim a normal end."""
        if self.category in HOST_READINGS:
            if self.processes_left is not None or self.agent_cgroup != "unread":
                raise ValueError("a host reading read nothing of the guest's confinement")
            return self
        clean = self.processes_left == 0 and self.agent_cgroup == "emptied"
        if not clean and self.category != "confinement_breached":
            raise ValueError("anything left of the agent's code is confinement_breached")
        return self


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
    """`tool_call/4`: tool_call/3, and the tools and outcome an agent CLI reports."""

    schema_: Literal["harness.receipt.tool_call/4"] = Field(
        "harness.receipt.tool_call/4", alias="schema"
    )
    index: Index
    turn: Index
    tool: ToolName
    decision: PermissionVerdict
    decided_by: PermissionSource
    rule_index: Index | None
    outcome: ToolOutcome
    edit_match: EditMatch | None
    run_exit: RunExit | None
    net_isolation: NetIsolation | None
    cgroup_end: CgroupEnd | None
    """For a `run_tests` that ran: how the call's own cgroup ended (every process the
    command started, detached ones included, killed and shown gone); None otherwise."""
    output_bytes: ByteCount
    truncated: bool
    duration_ms: Millis

    @model_validator(mode="after")
    def _cgroup_end_for_runs(self) -> ToolCallRecord:
        ran = self.tool == "run_tests" and self.run_exit is not None
        if (self.cgroup_end is not None) != ran:
            raise ValueError("cgroup_end is present exactly for a run_tests that ran")
        return self
