"""The tools' closed categories. Their one home is receipts.records.agent, because
tool-call records carry them; this module re-exports them for the tools' own imports
(guest code may import receipts, and nothing else of ours)."""

from __future__ import annotations

from receipts.records.agent import (
    ApprovalsPolicy,
    DispatchRefusal,
    EditMatch,
    JailRefusal,
    LoopToolName,
    LoopToolOutcome,
    NetIsolation,
    NetMechanism,
    NetPolicy,
    PermissionAction,
    PermissionSource,
    PermissionVerdict,
    RunExit,
    ToolRefusal,
)

ToolName = LoopToolName
"""The loop's own tools. A tool_call record may also name an agent CLI's tools; those
are not this package's to run, so its rules and registry know only these."""
Outcome = LoopToolOutcome
"""The loop's tools' outcomes; `cli_tool_error` is an agent CLI adapter's, not theirs."""
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
