"""Permissions: last matching rule wins, default ask, ask resolved by approvals."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from guest.tools.categories import ToolName
from guest.tools.permissions import PermissionPolicy, PermissionRule
from guest.tools.registry import ToolSet
from guest.tools.result import MESSAGES
from tests.guest.tools.support import PASS_COMMAND, call

RULES = [
    PermissionRule(tool="*", pattern="*", action="allow"),
    PermissionRule(tool="write", pattern="secrets/**", action="deny"),
    PermissionRule(tool="write", pattern="secrets/ok.txt", action="allow"),
    PermissionRule(tool="edit", pattern="*.lock", action="ask"),
]


def test_last_match_wins() -> None:
    policy = PermissionPolicy(RULES, "deny_all")
    allowed = policy.decide("write", "secrets/ok.txt")
    assert (allowed.decision, allowed.rule_index, allowed.resolved_by) == ("allow", 2, "rule")
    denied = policy.decide("write", "secrets/key.pem")
    assert (denied.decision, denied.rule_index, denied.matched) == ("deny", 1, "deny")
    other = policy.decide("read", "secrets/key.pem")
    assert (other.decision, other.rule_index) == ("allow", 0)


def test_default_is_ask_resolved_by_approvals() -> None:
    decision = PermissionPolicy([], "deny_all").decide("read", "a.txt")
    assert decision.matched == "ask"
    assert decision.rule_index is None
    assert decision.resolved_by == "approvals_policy"
    assert decision.decision == "deny"
    assert PermissionPolicy([], "approve_all").decide("read", "a.txt").decision == "allow"


def test_ask_rule_resolved_by_approvals() -> None:
    decision = PermissionPolicy(RULES, "approve_all").decide("edit", "deps/poetry.lock")
    assert (decision.matched, decision.rule_index, decision.decision) == ("ask", 3, "allow")
    assert decision.approvals == "approve_all"


def test_approve_read_only() -> None:
    policy = PermissionPolicy([], "approve_read_only")
    read_only: tuple[ToolName, ...] = ("read", "list", "glob", "grep", "finish")
    mutating: tuple[ToolName, ...] = ("edit", "write", "run_tests")
    for tool in read_only:
        assert policy.decide(tool, "").decision == "allow"
    for tool in mutating:
        assert policy.decide(tool, "").decision == "deny"


def test_decision_carries_no_argument_text() -> None:
    decision = PermissionPolicy(RULES, "deny_all").decide("write", "secrets/key.pem")
    assert "secrets" not in decision.model_dump_json()
    assert set(decision.model_dump()) == {
        "tool",
        "decision",
        "matched",
        "rule_index",
        "resolved_by",
        "approvals",
    }


def test_rules_are_validated() -> None:
    with pytest.raises(ValidationError):
        PermissionRule.model_validate({"tool": "bash", "pattern": "*", "action": "allow"})
    with pytest.raises(ValidationError):
        PermissionRule(tool="read", pattern="[oops", action="allow")
    with pytest.raises(ValidationError):
        PermissionRule.model_validate({"tool": "read", "pattern": "*", "action": "maybe"})


def test_denied_call_does_not_run(ws: Path) -> None:
    with ToolSet(ws, PASS_COMMAND, RULES, "deny_all") as ts:
        result = call(ts, "write", filePath="secrets/key.pem", content="x")
        assert result.outcome == "permission_denied"
        assert result.permission is not None
        assert result.permission.rule_index == 1
        assert not (ws / "secrets").exists()
        ok = call(ts, "write", filePath="secrets/ok.txt", content="x")
        assert ok.outcome == "ok"
        assert (ws / "secrets" / "ok.txt").read_text() == "x"


def test_default_ask_denies_under_deny_all(ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    with ToolSet(ws, PASS_COMMAND, [], "deny_all") as ts:
        result = call(ts, "read", filePath="a.txt")
    assert result.outcome == "permission_denied"
    assert result.output == MESSAGES["permission_denied"]
