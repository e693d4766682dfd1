"""The counts a summary record carries, from the records it summarizes.

One definition for the writer (the guest's agent, the harness's worker record) and the
audit (receipts/claim.py, receipts/audit/consistency.py). Its own module, importing
only record types for the checker: the guest's agent imports it at start-up, where
loading every record kind (what receipts/claim.py needs) costs seconds under TCG.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from receipts.records.agent import AgentTurnRecord
    from receipts.records.legacy import AnyToolCallRecord, AnyWorkerRequestRecord


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


def worker_totals(
    requests: Sequence[AnyWorkerRequestRecord],
) -> WorkerTotals:
    """The worker record's counts: what its request records show happened."""
    return WorkerTotals(
        requests=len(requests),
        admitted=sum(r.admission == "admitted" for r in requests),
        refused=sum(r.admission == "refused" for r in requests),
        prompt_tokens_total=sum(r.prompt_tokens for r in requests),
        completion_tokens_total=sum(r.completion_tokens for r in requests),
    )


def agent_totals(
    turns: Sequence[AgentTurnRecord], tool_calls: Sequence[AnyToolCallRecord]
) -> AgentTotals:
    """The agent record's counts: what its turn and tool-call records show happened."""
    return AgentTotals(
        turns=len(turns),
        tool_calls=len(tool_calls),
        invalid_tool_calls=sum(t.kind == "invalid_tool_call" for t in turns),
        prompt_tokens_total=sum(t.prompt_tokens for t in turns),
        completion_tokens_total=sum(t.completion_tokens for t in turns),
    )
