"""What the stages of a trial have recorded: the one object they write to, and the
exception with which a stage ends the trial once its record says why."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from host.release import CleanupResult
from receipts.records import (
    AgentTurnRecord,
    HostStateRecord,
    Record,
    ToolCallRecord,
    TrialRecord,
    WorkerRequestRecord,
)
from receipts.recordset import RecordSet


class StageFailed(Exception):
    """A stage ended the trial; its record (already collected) names the category."""


@dataclass
class Evidence:
    """What the stages have recorded so far. `records` holds each single record under its
    RecordSet field name (a stage's, the verification guest's, memory); what of it the
    receipt may claim is decided once, at bundling (receipts/claim.py)."""

    records: dict[str, Record] = field(default_factory=dict)
    turns: tuple[AgentTurnRecord, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    worker_requests: tuple[WorkerRequestRecord, ...] = ()

    def put(self, name: str, record: Record) -> None:
        self.records[name] = record

    def collected(self) -> RecordSet:
        """Everything recorded so far, as records (no trial record yet)."""
        return RecordSet(
            agent_turns=self.turns,
            worker_requests=self.worker_requests,
            tool_calls=self.tool_calls,
            **self.records,  # type: ignore[arg-type]
        )

    def record_set(
        self, trial: TrialRecord, hoststate: HostStateRecord, cleanup: list[CleanupResult]
    ) -> RecordSet:
        return dataclasses.replace(
            self.collected(),
            trial=trial,
            hoststate=hoststate,
            cleanup=tuple(result.to_record(index) for index, result in enumerate(cleanup)),
        )
