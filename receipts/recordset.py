"""The set of records one trial leaves, and the fixed entry names they have in a receipt.

Every record kind has one home: a singleton entry `<kind>.json`, or a numbered sequence
`<kind>/NNNNNN.json` counted from 000000 without gaps. A name outside this table is an
unknown entry and is refused by the reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Final

from receipts.records import (
    AgentRecord,
    AgentRecordV1,
    AgentTurnRecord,
    CleanupRecord,
    DispatchRecord,
    DispatchRecordV1,
    GateRecord,
    HostStateRecord,
    HostStateRecordV1,
    HostStateRecordV2,
    ImageRecord,
    MemoryRecord,
    MemoryRecordV1,
    ModelRecord,
    PreflightRecord,
    Record,
    SourceRecord,
    ToolCallRecord,
    ToolCallRecordV1,
    TrialRecord,
    TrialRecordV1,
    TrialRecordV2,
    VerificationRecord,
    VerificationRecordV1,
    VerificationRecordV2,
    VerifierVmRecord,
    VmRecord,
    WorkerRecord,
    WorkerRequestRecord,
    WorkerRequestRecordV1,
)
from receipts.records.trial import Stage


@dataclass(frozen=True)
class RecordSet:
    """All records of one trial. Singletons are None when absent; sequences are in index order."""

    trial: TrialRecord | TrialRecordV2 | TrialRecordV1 | None = None
    preflight: PreflightRecord | None = None
    source: SourceRecord | None = None
    dispatch: DispatchRecord | DispatchRecordV1 | None = None
    model: ModelRecord | None = None
    image: ImageRecord | None = None
    vm: VmRecord | None = None
    verifier_vm: VerifierVmRecord | None = None
    """The pristine second guest the hidden tests ran in (absent in receipts of harnesses
    that verified inside the agent's guest)."""
    gate: GateRecord | None = None
    worker: WorkerRecord | None = None
    agent: AgentRecord | AgentRecordV1 | None = None
    verification: VerificationRecord | VerificationRecordV2 | VerificationRecordV1 | None = None
    hoststate: HostStateRecord | HostStateRecordV2 | HostStateRecordV1 | None = None
    memory: MemoryRecord | MemoryRecordV1 | None = None
    worker_requests: tuple[WorkerRequestRecord | WorkerRequestRecordV1, ...] = field(default=())
    agent_turns: tuple[AgentTurnRecord, ...] = field(default=())
    tool_calls: tuple[ToolCallRecord | ToolCallRecordV1, ...] = field(default=())
    cleanup: tuple[CleanupRecord, ...] = field(default=())

    def stage_record(self, stage: Stage) -> Record | None:
        record = getattr(self, stage)
        assert record is None or isinstance(record, Record)
        return record


@dataclass(frozen=True)
class Kind:
    """One record kind: the RecordSet attribute it lives in, its model, its naming.

    `model` is the version the harness writes. `legacy` are older versions of the same
    entry that the audit still reads, so that a receipt written by an older harness stays
    auditable; the bundle writer refuses them, so no new receipt carries one.
    """

    name: str
    model: type[Record]
    sequence: bool
    legacy: tuple[type[Record], ...] = ()

    def models(self) -> tuple[type[Record], ...]:
        """Every version of this kind the audit reads: the current one first."""
        return (self.model, *self.legacy)

    def model_for(self, schema_id: object) -> type[Record] | None:
        """The closed model whose schema id is exactly `schema_id`; None for any other
        value (an unknown version, another kind's id, a non-string)."""
        for model in self.models():
            if schema_id == model.schema_id():
                return model
        return None

    def entry_name(self, index: int | None = None) -> str:
        if self.sequence:
            assert index is not None
            return f"{self.name}/{index:06d}.json"
        return f"{self.name}.json"


KINDS: Final[tuple[Kind, ...]] = (
    Kind("trial", TrialRecord, sequence=False, legacy=(TrialRecordV2, TrialRecordV1)),
    Kind("preflight", PreflightRecord, sequence=False),
    Kind("source", SourceRecord, sequence=False),
    Kind("dispatch", DispatchRecord, sequence=False, legacy=(DispatchRecordV1,)),
    Kind("model", ModelRecord, sequence=False),
    Kind("image", ImageRecord, sequence=False),
    Kind("vm", VmRecord, sequence=False),
    Kind("verifier_vm", VerifierVmRecord, sequence=False),
    Kind("gate", GateRecord, sequence=False),
    Kind("worker", WorkerRecord, sequence=False),
    Kind("agent", AgentRecord, sequence=False, legacy=(AgentRecordV1,)),
    Kind(
        "verification",
        VerificationRecord,
        sequence=False,
        legacy=(VerificationRecordV2, VerificationRecordV1),
    ),
    Kind(
        "hoststate",
        HostStateRecord,
        sequence=False,
        legacy=(HostStateRecordV2, HostStateRecordV1),
    ),
    Kind("memory", MemoryRecord, sequence=False, legacy=(MemoryRecordV1,)),
    Kind("worker_requests", WorkerRequestRecord, sequence=True, legacy=(WorkerRequestRecordV1,)),
    Kind("agent_turns", AgentTurnRecord, sequence=True),
    Kind("tool_calls", ToolCallRecord, sequence=True, legacy=(ToolCallRecordV1,)),
    Kind("cleanup", CleanupRecord, sequence=True),
)
KIND_BY_NAME: Final[dict[str, Kind]] = {kind.name: kind for kind in KINDS}
assert set(KIND_BY_NAME) == {f.name for f in fields(RecordSet)}

MANIFEST_NAME: Final = "manifest.json"
ENTRY_NAME_PATTERN: Final = r"^(?:manifest|[a-z_]{1,32}(?:/[0-9]{6})?)\.json$"
_SINGLETON = re.compile(r"^([a-z_]{1,32})\.json$")
_SEQUENCED = re.compile(r"^([a-z_]{1,32})/([0-9]{6})\.json$")


def classify_entry(name: str) -> tuple[Kind, int | None] | None:
    """Map an entry name to its kind and sequence index; None for any unknown name."""
    if match := _SINGLETON.fullmatch(name):
        kind = KIND_BY_NAME.get(match.group(1))
        return (kind, None) if kind is not None and not kind.sequence else None
    if match := _SEQUENCED.fullmatch(name):
        kind = KIND_BY_NAME.get(match.group(1))
        return (kind, int(match.group(2))) if kind is not None and kind.sequence else None
    return None


def record_entries(records: RecordSet) -> dict[str, Record]:
    """Every present record under its entry name (the manifest excluded)."""
    entries: dict[str, Record] = {}
    for kind in KINDS:
        value = getattr(records, kind.name)
        if kind.sequence:
            for position, record in enumerate(value):
                entries[kind.entry_name(position)] = record
        elif value is not None:
            entries[kind.entry_name()] = value
    return entries
