"""Which worker request each turn of an agent CLI was, read from the worker's records.

The harness loop names the request of each turn itself: it made the request. An agent
CLI makes its requests out of our sight, and its event stream shows only the ones that
became steps: a request the worker refused (OpenCode 1.18.33 prints a
`ContextOverflowError` and no step when the prompt outgrows the context, then asks again
with a compacted one), a retry, or a request of the CLI's own gives no step, so the
turn's position is not its request's. The worker's records are the worker's, written
outside the agent's reach; so the host binds each turn, in order, to the next request
at or after the last one bound whose token counts are the turn's (the audit's
`turn_references` checks exactly that pair). A turn no request matches names none
(`request_index` null) rather than a request it was not.
"""

from __future__ import annotations

from collections.abc import Sequence

from receipts.records import AgentTurnRecord, WorkerRequestRecord


def bind_turns(
    turns: Sequence[AgentTurnRecord], requests: Sequence[WorkerRequestRecord]
) -> tuple[AgentTurnRecord, ...]:
    bound: list[AgentTurnRecord] = []
    cursor = 0
    for turn in turns:
        if turn.request_index is None:  # a scripted turn: no request to bind
            bound.append(turn)
            continue
        counts = (turn.prompt_tokens, turn.completion_tokens)
        match = next(
            (
                i
                for i in range(cursor, len(requests))
                if (requests[i].prompt_tokens, requests[i].completion_tokens) == counts
            ),
            None,
        )
        if match is not None:
            cursor = match + 1
        bound.append(turn.model_copy(update={"request_index": match}))
    return tuple(bound)
