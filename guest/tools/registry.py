"""The tool set: the OpenAI `tools` list and `dispatch(name, arguments_json)`.

Dispatch is the edge where model output becomes action (docs/engineering.md §13), so it
runs one fixed sequence and every step that can refuse has a closed category:
known tool name → strict JSON → argument model → path parsed by the jail →
permission → tool. A refusal returns a short fixed message that never echoes the
invalid text, so a malformed call cannot be replayed into the model's context or
into a log. Every result is bounded once more here, whatever the tool did, and
timed with a monotonic clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from guest.tools.base import Tool
from guest.tools.bounded import cut_utf8, utf8_len
from guest.tools.categories import ApprovalsPolicy, NetPolicy, Outcome, ToolName
from guest.tools.confine import RunLimits
from guest.tools.edit import EditTool
from guest.tools.finish import FinishTool
from guest.tools.glob_tool import GlobTool
from guest.tools.grep import DEFAULT_DEADLINE_S, GrepTool
from guest.tools.jail import Jail, JailError, RelPath, parse_relative
from guest.tools.jsonargs import ArgumentsError, parse_arguments
from guest.tools.list_tool import ListTool
from guest.tools.permissions import PermissionDecision, PermissionPolicy, PermissionRule
from guest.tools.read import ReadTool
from guest.tools.result import ToolOutput, ToolResult, refusal
from guest.tools.run_tests import RunTestsTool
from guest.tools.sandbox import Sandbox
from guest.tools.seen import SeenFiles
from guest.tools.spec import openai_tool
from guest.tools.write import WriteTool

# Final bound on any text returned to the model, above every tool's own cap.
MAX_RESULT_BYTES = 64 * 1024
_TRUNCATION_NOTE = "\n(Output truncated.)"

DEFAULT_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
}
"""HOME and TMPDIR are the sandbox's private tmp (guest/tools/sandbox.py)."""


class ToolSet:
    """The agent's tools over one workspace, with one policy and one test command."""

    def __init__(
        self,
        workspace_root: str | os.PathLike[str],
        test_command: Sequence[str],
        rules: Sequence[PermissionRule],
        approvals: ApprovalsPolicy,
        *,
        run_limits: RunLimits | None = None,
        net_policy: NetPolicy = "best_effort",
        net_mechanism: Literal["auto", "unshare_syscall", "unshare_binary"] = "auto",
        test_env: Mapping[str, str] | None = None,
        grep_deadline_s: float = DEFAULT_DEADLINE_S,
        sandbox: Sandbox | None = None,
    ) -> None:
        self._jail = Jail(workspace_root)
        self._policy = PermissionPolicy(rules, approvals)
        seen = SeenFiles()
        tools: list[Tool[Any]] = [
            ReadTool(self._jail, seen),
            EditTool(self._jail, seen),
            WriteTool(self._jail, seen),
            ListTool(self._jail),
            GlobTool(self._jail),
            GrepTool(self._jail, deadline_s=grep_deadline_s),
            RunTestsTool(
                self._jail.root,
                test_command,
                env=DEFAULT_ENV if test_env is None else test_env,
                limits=run_limits or RunLimits(),
                net_policy=net_policy,
                mechanism=net_mechanism,
                sandbox=sandbox,
            ),
            FinishTool(),
        ]
        self._tools: dict[str, Tool[Any]] = {t.name: t for t in tools}

    @property
    def workspace_root(self) -> str:
        return self._jail.root

    def close(self) -> None:
        self._jail.close()

    def __enter__(self) -> ToolSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def openai_tools(self) -> list[dict[str, Any]]:
        """The `tools` list for an OpenAI-compatible chat completion request."""
        return [openai_tool(t.name, t.description, t.args_model) for t in self._tools.values()]

    def dispatch(self, name: str, arguments: str) -> ToolResult:
        """Run one tool call end to end; never raises for bad model input."""
        start = time.monotonic_ns()
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return _finish(None, refusal("unknown_tool"), start, None)
        tool_name: ToolName = tool.name
        try:
            parsed = parse_arguments(arguments)
        except ArgumentsError as exc:
            return _finish(tool_name, refusal(exc.category), start, None)
        try:
            args: BaseModel = tool.args_model.model_validate(parsed)
        except ValidationError:
            return _finish(tool_name, refusal("invalid_arguments"), start, None)
        raw_path = tool.target(args)
        path: RelPath | None = None
        if raw_path is not None:
            try:
                path = parse_relative(raw_path)
            except JailError as exc:
                return _finish(tool_name, refusal(exc.category), start, None)
        decision = self._policy.decide(tool_name, "/".join(path.parts) if path else "")
        if decision.decision != "allow":
            return _finish(tool_name, refusal("permission_denied"), start, decision)
        try:
            output = tool.run(args, path)
        except JailError as exc:
            output = refusal(exc.category)
        except OSError:
            output = refusal("os_error")
        return _finish(tool_name, output, start, decision)


def _finish(
    tool: ToolName | None,
    output: ToolOutput,
    start_ns: int,
    decision: PermissionDecision | None,
) -> ToolResult:
    """Apply the final bound, count it, time the call, and build the result.

    `bytes_before_truncation` is the tool's text plus what the tool's own caps
    omitted; the final cut here only shortens what the model sees.
    """
    if output.outcome != "ok":
        output = refusal(output.outcome)  # refusals carry their fixed message only
    text = output.text
    size = utf8_len(text)
    truncated = output.truncated or output.omitted_bytes > 0
    if size > MAX_RESULT_BYTES:
        text = cut_utf8(text, MAX_RESULT_BYTES - len(_TRUNCATION_NOTE)) + _TRUNCATION_NOTE
        truncated = True
    outcome: Outcome = output.outcome
    return ToolResult(
        tool=tool,
        outcome=outcome,
        output=text,
        bytes_out=utf8_len(text),
        bytes_before_truncation=size + output.omitted_bytes,
        truncated=truncated,
        duration_ms=(time.monotonic_ns() - start_ns) // 1_000_000,
        permission=decision,
        details=output.details,
    )
