"""The tools' closed categories. Their one home is receipts.records.agent, because
tool-call records carry them; this module re-exports them for the tools' own imports
(guest code may import receipts, and nothing else of ours)."""

from __future__ import annotations

from receipts.records.agent import (
    ApprovalsPolicy,
    DispatchRefusal,
    EditMatch,
    JailRefusal,
    NetIsolation,
    NetMechanism,
    NetPolicy,
    PermissionAction,
    PermissionSource,
    PermissionVerdict,
    RunExit,
    ToolName,
    ToolOutcome,
    ToolRefusal,
)

Outcome = ToolOutcome
ResolvedBy = PermissionSource

__all__ = [
    "ApprovalsPolicy",
    "DispatchRefusal",
    "EditMatch",
    "JailRefusal",
    "NetIsolation",
    "NetMechanism",
    "NetPolicy",
    "Outcome",
    "PermissionAction",
    "PermissionVerdict",
    "ResolvedBy",
    "RunExit",
    "ToolName",
    "ToolRefusal",
]
