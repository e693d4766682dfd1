"""Binding an agent CLI's turns to the worker requests they were, by the worker's records.

The figures are a real qwen-coder run of OpenCode 1.18.33 (polyglot-py-list-ops): the
second request outgrew the context, the worker refused it (400, no step), OpenCode asked
again with a compacted prompt, and every later step sat one request further on than its
position. Bound by position, the receipt did not audit (`reference_mismatch` on ten
turns); bound by the worker's counts it does.
"""

from __future__ import annotations

from typing import cast

from harness.trial.evidence import Evidence
from harness.trial.guestrun import stop_worker
from harness.trial.owned import OwnedResources
from harness.trial.turnbinding import bind_turns
from harness.trial.worker import Worker
from receipts.records import AgentTurnRecord, WorkerRequestRecord
from tests.receipts.builders import accepted_model_trial, replace

REQUESTS = [
    (5448, 55),
    (8347, 0),  # refused: context_length_exceeded
    (1368, 323),  # the compacted session
    (5459, 38),
    (5650, 24),
    (5832, 24),
    (6014, 24),
    (6196, 24),
    (6378, 24),
    (6560, 24),
    (6742, 24),
    (7087, 323),
]
TURNS = [REQUESTS[i] for i in (0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)]


def _turn(index: int, counts: tuple[int, int], request: int | None) -> AgentTurnRecord:
    return AgentTurnRecord(
        index=index,
        request_index=request,
        kind="tool_call",
        invalid_category=None,
        prompt_tokens=counts[0],
        completion_tokens=counts[1],
        duration_ms=1,
    )


def _requests(counts: list[tuple[int, int]]) -> tuple[WorkerRequestRecord, ...]:
    template = accepted_model_trial().worker_requests[0]
    return tuple(
        replace(template, index=i, prompt_tokens=p, completion_tokens=c)
        for i, (p, c) in enumerate(counts)
    )


def test_a_refused_request_shifts_no_turn() -> None:
    positional = [_turn(i, counts, i) for i, counts in enumerate(TURNS)]
    bound = bind_turns(positional, _requests(REQUESTS))
    assert [t.request_index for t in bound] == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert [(t.prompt_tokens, t.completion_tokens) for t in bound] == TURNS


def test_a_turn_no_request_matches_names_none_and_order_holds() -> None:
    turns = [_turn(0, (10, 1), 0), _turn(1, (99, 9), 1), _turn(2, (10, 1), 2)]
    bound = bind_turns(turns, _requests([(10, 1), (10, 1)]))
    assert [t.request_index for t in bound] == [0, None, 1]


def test_scripted_turns_stay_unbound() -> None:
    turns = [_turn(0, (0, 0), None)]
    assert bind_turns(turns, _requests([(0, 0)]))[0].request_index is None


class _StoppedWorker:
    def __init__(self, requests: tuple[WorkerRequestRecord, ...]) -> None:
        self.requests = requests

    async def stop(self, _owned: object) -> tuple[object, tuple[WorkerRequestRecord, ...]]:
        record = accepted_model_trial().worker
        return record, self.requests


async def test_stopping_the_worker_binds_a_clis_turns_and_only_a_clis() -> None:
    for agent_cli, expected in ((True, [0, 2]), (False, [0, 1])):
        evidence = Evidence()
        evidence.turns = (_turn(0, REQUESTS[0], 0), _turn(1, REQUESTS[2], 1))
        worker = cast(Worker, _StoppedWorker(_requests(REQUESTS[:3])))
        await stop_worker(worker, cast(OwnedResources, None), evidence, agent_cli=agent_cli)
        assert [t.request_index for t in evidence.turns] == expected
