"""Permission policy: `allow` / `ask` / `deny` rules per tool and path glob.

As in OpenCode, the last matching rule wins and no match means `ask`. A trial has
nobody to ask, so `ask` is answered by the profile's approvals policy. Every
answer is a `PermissionDecision` naming the rule that decided (its index, or None
for the default) and how `ask` was resolved; it never carries the call's
arguments, so a decision can go into a receipt as is.

Path patterns use `globpattern` semantics and are matched against the call's
parsed path relative to the workspace root (`""` for the root and for tools that
take no path), so `*` matches everything, `*.env` any `.env` file at any depth,
`src/**` anything under `src`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from guest.tools.categories import (
    ApprovalsPolicy,
    PermissionAction,
    PermissionVerdict,
    ResolvedBy,
    ToolName,
)
from guest.tools.globpattern import Glob, PatternError, compile_glob

READ_ONLY_TOOLS: frozenset[str] = frozenset({"read", "list", "glob", "grep", "finish"})

_FROZEN = ConfigDict(extra="forbid", frozen=True, strict=True)


class PermissionRule(BaseModel):
    """One rule: for `tool` (or every tool, `*`) on paths matching `pattern`."""

    model_config = _FROZEN
    tool: ToolName | Literal["*"]
    pattern: Annotated[str, Field(min_length=1, max_length=512)] = "*"
    action: PermissionAction

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compile_glob(value)
        except PatternError as exc:
            raise ValueError("pattern is not a valid glob") from exc
        return value


class PermissionDecision(BaseModel):
    """The answer for one call: what was decided, by which rule, resolved how."""

    model_config = _FROZEN
    tool: ToolName
    decision: PermissionVerdict
    matched: PermissionAction  # what the rule (or the default) said
    rule_index: Annotated[int, Field(ge=0)] | None  # None: no rule matched, default `ask`
    resolved_by: ResolvedBy
    approvals: ApprovalsPolicy | None  # set when `ask` was resolved by the policy


def _resolve_ask(tool: ToolName, approvals: ApprovalsPolicy) -> PermissionVerdict:
    if approvals == "approve_all":
        return "allow"
    if approvals == "approve_read_only":
        return "allow" if tool in READ_ONLY_TOOLS else "deny"
    return "deny"


class PermissionPolicy:
    """Ordered rules plus the approvals policy that answers `ask`."""

    def __init__(self, rules: Sequence[PermissionRule], approvals: ApprovalsPolicy) -> None:
        self._rules = tuple(rules)
        self._globs: tuple[Glob, ...] = tuple(compile_glob(r.pattern) for r in self._rules)
        self._approvals: ApprovalsPolicy = approvals

    def decide(self, tool: ToolName, rel_path: str) -> PermissionDecision:
        """Decide for `tool` acting on `rel_path` (relative, `""` for none/root)."""
        index: int | None = None
        action: PermissionAction = "ask"
        for i, (rule, glob) in enumerate(zip(self._rules, self._globs, strict=True)):
            if rule.tool in ("*", tool) and glob.matches(rel_path):
                index, action = i, rule.action
        if action == "ask":
            return PermissionDecision(
                tool=tool,
                decision=_resolve_ask(tool, self._approvals),
                matched="ask",
                rule_index=index,
                resolved_by="approvals_policy",
                approvals=self._approvals,
            )
        return PermissionDecision(
            tool=tool,
            decision=action,
            matched=action,
            rule_index=index,
            resolved_by="rule",
            approvals=None,
        )
