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
    AgentTurnRecord,
    CleanupRecord,
    GateRecord,
    ImageRecord,
    ModelRecord,
    PreflightRecord,
    Record,
    SourceRecord,
    VerifierVmRecord,
    VmRecord,
    WorkerRecord,
)
from receipts.records.agent import AgentRecord, ToolCallRecord
from receipts.records.dispatch import DispatchRecord
from receipts.records.hoststate import HostStateRecord
from receipts.records.legacy import (
    LEGACY,
    AnyAgentRecord,
    AnyDispatchRecord,
    AnyHostStateRecord,
    AnyMemoryRecord,
    AnyModelRecord,
    AnyToolCallRecord,
    AnyTrialRecord,
    AnyVerificationRecord,
    AnyVerifierVmRecord,
    AnyVmRecord,
    AnyWorkerRecord,
    AnyWorkerRequestRecord,
)
from receipts.records.memory import MemoryRecord
from receipts.records.trial import Stage, TrialRecord
from receipts.records.verification import VerificationRecord
from receipts.records.worker import WorkerRequestRecord


@dataclass(frozen=True)
class RecordSet:
    """All records of one trial. Singletons are None when absent; sequences are in index order."""

    trial: AnyTrialRecord | None = None
    preflight: PreflightRecord | None = None
    source: SourceRecord | None = None
    dispatch: AnyDispatchRecord | None = None
    model: AnyModelRecord | None = None
    image: ImageRecord | None = None
    vm: AnyVmRecord | None = None
    verifier_vm: AnyVerifierVmRecord | None = None
    """The pristine second guest the hidden tests ran in (absent in receipts of harnesses
    that verified inside the agent's guest)."""
    gate: GateRecord | None = None
    worker: AnyWorkerRecord | None = None
    agent: AnyAgentRecord | None = None
    verification: AnyVerificationRecord | None = None
    hoststate: AnyHostStateRecord | None = None
    memory: AnyMemoryRecord | None = None
    worker_requests: tuple[AnyWorkerRequestRecord, ...] = field(default=())
    agent_turns: tuple[AgentTurnRecord, ...] = field(default=())
    tool_calls: tuple[AnyToolCallRecord, ...] = field(default=())
    cleanup: tuple[CleanupRecord, ...] = field(default=())

    def stage_record(self, stage: Stage) -> Record | None:
        record = getattr(self, stage)
        assert record is None or isinstance(record, Record)
        return record


@dataclass(frozen=True)
class Kind:
    """One record kind: the RecordSet attribute it lives in, its model, its naming.

    `model` is the version the harness writes. `legacy` are older versions of the same
    entry that the audit still reads (receipts/records/legacy.py), so that a receipt
    written by an older harness stays auditable; the bundle writer refuses them, so no
    new receipt carries one.
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


KINDS: Final[tuple[Kind, ...]] = tuple(
    Kind(name, model, sequence, legacy=LEGACY.get(name, ()))
    for name, model, sequence in (
        ("trial", TrialRecord, False),
        ("preflight", PreflightRecord, False),
        ("source", SourceRecord, False),
        ("dispatch", DispatchRecord, False),
        ("model", ModelRecord, False),
        ("image", ImageRecord, False),
        ("vm", VmRecord, False),
        ("verifier_vm", VerifierVmRecord, False),
        ("gate", GateRecord, False),
        ("worker", WorkerRecord, False),
        ("agent", AgentRecord, False),
        ("verification", VerificationRecord, False),
        ("hoststate", HostStateRecord, False),
        ("memory", MemoryRecord, False),
        ("worker_requests", WorkerRequestRecord, True),
        ("agent_turns", AgentTurnRecord, True),
        ("tool_calls", ToolCallRecord, True),
        ("cleanup", CleanupRecord, True),
    )
)
KIND_BY_NAME: Final[dict[str, Kind]] = {kind.name: kind for kind in KINDS}
assert set(KIND_BY_NAME) == {f.name for f in fields(RecordSet)}
assert set(LEGACY) <= set(KIND_BY_NAME)

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
