"""What a trial's receipt may claim, computed once for the writer and the audit.

Why one home: a summary's totals and the set of records a failed trial keeps are rules
about the evidence. Written twice (once where the harness builds the receipt, once where
the audit checks it), the two copies can disagree, and then the harness writes receipts
that fail its own audit. Here each rule is a pure function of the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from receipts.records import (
    AgentTurnRecord,
    ToolCallRecord,
    ToolCallRecordV1,
    WorkerRequestRecord,
)


class WorkerTotals(TypedDict):
    requests: int
    admitted: int
    refused: int
    prompt_tokens_total: int
    completion_tokens_total: int


class AgentTotals(TypedDict):
    turns: int
    tool_calls: int
    invalid_tool_calls: int
    prompt_tokens_total: int
    completion_tokens_total: int


def worker_totals(requests: Sequence[WorkerRequestRecord]) -> WorkerTotals:
    """The worker record's counts: what its request records show happened."""
    return WorkerTotals(
        requests=len(requests),
        admitted=sum(r.admission == "admitted" for r in requests),
        refused=sum(r.admission == "refused" for r in requests),
        prompt_tokens_total=sum(r.prompt_tokens for r in requests),
        completion_tokens_total=sum(r.completion_tokens for r in requests),
    )


def agent_totals(
    turns: Sequence[AgentTurnRecord], tool_calls: Sequence[ToolCallRecord | ToolCallRecordV1]
) -> AgentTotals:
    """The agent record's counts: what its turn and tool-call records show happened."""
    return AgentTotals(
        turns=len(turns),
        tool_calls=len(tool_calls),
        invalid_tool_calls=sum(t.kind == "invalid_tool_call" for t in turns),
        prompt_tokens_total=sum(t.prompt_tokens for t in turns),
        completion_tokens_total=sum(t.completion_tokens for t in turns),
    )
