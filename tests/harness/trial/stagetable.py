"""The trial's stage table with one stage wrapped, for the tests that inject a fault into
a real trial: `Trial(options, stages=around("agent", wrap))` runs `wrap(state, run)` in
the agent's place, inside the agent's step (so what it raises is attributed to it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from harness.trial.stage import StageAction, StageSpec, TrialState
from harness.trial.stages import STAGES
from receipts.records.trial import Stage

Wrap = Callable[[TrialState, StageAction], Awaitable[None]]


def around(name: Stage, wrap: Wrap, table: tuple[StageSpec, ...] = STAGES) -> tuple[StageSpec, ...]:
    def wrapped(spec: StageSpec) -> StageSpec:
        async def run(state: TrialState) -> None:
            await wrap(state, spec.run)

        return dataclasses.replace(spec, run=run)

    assert name in {spec.name for spec in table}
    return tuple(wrapped(spec) if spec.name == name else spec for spec in table)


def before(
    name: Stage,
    action: Callable[[TrialState], Awaitable[None]],
    table: tuple[StageSpec, ...] = STAGES,
) -> tuple[StageSpec, ...]:
    """`action`, then the stage itself."""

    async def wrap(state: TrialState, run: StageAction) -> None:
        await action(state)
        await run(state)

    return around(name, wrap, table)
