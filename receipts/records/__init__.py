"""Closed record models, one module per pipeline stage; older versions in legacy.py.

The names below are loaded on first use (PEP 562), not when the package is imported:
the guest's agent and verifier import the one or two record modules they write, and
under TCG building every record kind's pydantic models costs them seconds at start-up
(measured with `python -X importtime` in a guest: ~2 s of the agent's 6 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from receipts.records.agent import AgentRecord, AgentTurnRecord, ToolCallRecord
    from receipts.records.base import Part, Record
    from receipts.records.cleanup import CleanupRecord
    from receipts.records.dispatch import DispatchRecord
    from receipts.records.gate import GateRecord
    from receipts.records.hoststate import FacetComparison, HostStateRecord
    from receipts.records.image import ImageRecord
    from receipts.records.memory import MemoryRecord, MemorySample
    from receipts.records.model import ModelRecord, TensorCounts
    from receipts.records.preflight import PreflightRecord
    from receipts.records.source import SourceRecord
    from receipts.records.trial import TrialRecord
    from receipts.records.verification import VerificationRecord
    from receipts.records.vm import VerifierVmRecord, VmRecord
    from receipts.records.worker import WorkerRecord, WorkerRequestRecord

_MODULES = {
    "AgentRecord": "agent",
    "AgentTurnRecord": "agent",
    "ToolCallRecord": "agent",
    "Part": "base",
    "Record": "base",
    "CleanupRecord": "cleanup",
    "DispatchRecord": "dispatch",
    "GateRecord": "gate",
    "FacetComparison": "hoststate",
    "HostStateRecord": "hoststate",
    "ImageRecord": "image",
    "MemoryRecord": "memory",
    "MemorySample": "memory",
    "ModelRecord": "model",
    "TensorCounts": "model",
    "PreflightRecord": "preflight",
    "SourceRecord": "source",
    "TrialRecord": "trial",
    "VerificationRecord": "verification",
    "VerifierVmRecord": "vm",
    "VmRecord": "vm",
    "WorkerRecord": "worker",
    "WorkerRequestRecord": "worker",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentRecord",
    "AgentTurnRecord",
    "CleanupRecord",
    "DispatchRecord",
    "FacetComparison",
    "GateRecord",
    "HostStateRecord",
    "ImageRecord",
    "MemoryRecord",
    "MemorySample",
    "ModelRecord",
    "Part",
    "PreflightRecord",
    "Record",
    "SourceRecord",
    "TensorCounts",
    "ToolCallRecord",
    "TrialRecord",
    "VerificationRecord",
    "VerifierVmRecord",
    "VmRecord",
    "WorkerRecord",
    "WorkerRequestRecord",
]
