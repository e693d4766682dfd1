"""Closed record models, one module per pipeline stage."""

from receipts.records.agent import (
    AgentRecord,
    AgentRecordV1,
    AgentTurnRecord,
    ToolCallRecord,
    ToolCallRecordV1,
)
from receipts.records.base import Part, Record
from receipts.records.cleanup import CleanupRecord
from receipts.records.dispatch import AnyDispatchRecord, DispatchRecord, DispatchRecordV1
from receipts.records.gate import GateRecord
from receipts.records.hoststate import (
    AnyHostStateRecord,
    FacetComparison,
    FacetComparisonV1,
    FacetComparisonV2,
    HostStateRecord,
    HostStateRecordV1,
    HostStateRecordV2,
)
from receipts.records.image import ImageRecord
from receipts.records.memory import HeadroomSample, MemoryRecord, MemoryRecordV1, MemorySample
from receipts.records.model import ModelRecord, TensorCounts
from receipts.records.preflight import PreflightRecord
from receipts.records.source import SourceRecord
from receipts.records.trial import AnyTrialRecord, TrialRecord, TrialRecordV1, TrialRecordV2
from receipts.records.verification import (
    VerificationRecord,
    VerificationRecordV1,
    VerificationRecordV2,
)
from receipts.records.vm import VerifierVmRecord, VmRecord
from receipts.records.worker import WorkerRecord, WorkerRequestRecord, WorkerRequestRecordV1

__all__ = [
    "AgentRecord",
    "AgentRecordV1",
    "AgentTurnRecord",
    "AnyDispatchRecord",
    "AnyHostStateRecord",
    "AnyTrialRecord",
    "CleanupRecord",
    "DispatchRecord",
    "DispatchRecordV1",
    "FacetComparison",
    "FacetComparisonV1",
    "FacetComparisonV2",
    "GateRecord",
    "HeadroomSample",
    "HostStateRecord",
    "HostStateRecordV1",
    "HostStateRecordV2",
    "ImageRecord",
    "MemoryRecord",
    "MemoryRecordV1",
    "MemorySample",
    "ModelRecord",
    "Part",
    "PreflightRecord",
    "Record",
    "SourceRecord",
    "TensorCounts",
    "ToolCallRecord",
    "ToolCallRecordV1",
    "TrialRecord",
    "TrialRecordV1",
    "TrialRecordV2",
    "VerificationRecord",
    "VerificationRecordV1",
    "VerificationRecordV2",
    "VerifierVmRecord",
    "VmRecord",
    "WorkerRecord",
    "WorkerRequestRecord",
    "WorkerRequestRecordV1",
]
