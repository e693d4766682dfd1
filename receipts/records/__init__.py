"""Closed record models, one module per pipeline stage; older versions in legacy.py."""

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
