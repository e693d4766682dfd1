"""The stage table: every stage once, in the records' order, and a trial runs exactly the
stages receipts/verdict.py says it needs (the stages whose records the audit requires).

Mutation controls: without the table check in `Trial.__init__`,
test_a_table_without_a_stage_is_refused fails; with `stages()` running every row (its
`trial_stages` filter removed), test_a_trial_runs_the_stages_the_audit_requires fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.pipeline import Trial
from harness.trial.stage import StageSpec, TrialState
from harness.trial.stages import STAGES
from receipts.records.trial import STAGE_ORDER, Stage
from receipts.verdict import trial_stages

TASKS = Path(__file__).parents[3] / "profiles" / "tasks"
SOLUTION = TASKS / "py-one-line-fix" / "scripts" / "solution.json"


def _options(tmp_path: Path, *, scripted: bool, dispatched: bool) -> TrialOptions:
    return TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=SOLUTION if scripted else None,
        out_dir=tmp_path,
        accel="tcg",
        dispatch=tmp_path / "ticket.json" if dispatched else None,
    )


def test_the_table_holds_every_stage_in_the_records_order() -> None:
    assert tuple(stage.name for stage in STAGES) == STAGE_ORDER


def test_a_table_without_a_stage_is_refused(tmp_path: Path) -> None:
    options = _options(tmp_path, scripted=True, dispatched=False)
    without_gate = tuple(stage for stage in STAGES if stage.name != "gate")
    with pytest.raises(ValueError, match="stage table"):
        Trial(options, stages=without_gate)


@pytest.mark.parametrize("scripted", [True, False])
@pytest.mark.parametrize("dispatched", [True, False])
def test_a_trial_runs_the_stages_the_audit_requires(
    tmp_path: Path, scripted: bool, dispatched: bool
) -> None:
    ran: list[Stage] = []

    def recording(spec: StageSpec) -> StageSpec:
        async def run(_state: TrialState) -> None:
            ran.append(spec.name)

        return dataclasses.replace(spec, run=run, after=None)

    options = _options(tmp_path, scripted=scripted, dispatched=dispatched)
    trial = Trial(options, stages=tuple(recording(spec) for spec in STAGES))
    state = trial.state(tmp_path)
    asyncio.run(trial.stages(state))
    assert tuple(ran) == trial_stages(dispatched=dispatched, policy=trial.policy)
    assert ("dispatch" in ran) == dispatched
    assert ("model" in ran) == ("worker" in ran) == (not scripted)


def test_a_stage_that_loses_the_cancel_still_ends_the_trial(tmp_path: Path) -> None:
    """Python 3.11's wait_for can drop a cancel that lands as its inner future completes
    (seen once: a SIGTERM during the VM stage, then the trial ran on to a failed
    verification, exit 1, no `cancelled`). The next stage must not begin."""
    ran: list[Stage] = []
    entered = asyncio.Event()

    def recording(spec: StageSpec) -> StageSpec:
        async def run(_state: TrialState) -> None:
            ran.append(spec.name)
            if spec.name == "vm":
                entered.set()
                with contextlib.suppress(asyncio.CancelledError):  # the cancel, lost
                    await asyncio.sleep(3600)

        return dataclasses.replace(spec, run=run, after=None)

    trial = Trial(_options(tmp_path, scripted=True, dispatched=False), stages=tuple(
        recording(spec) for spec in STAGES
    ))  # fmt: skip
    state = trial.state(tmp_path)

    async def cancelled_in_vm() -> None:
        stages = asyncio.ensure_future(
            trial.stopping.run(trial.stages(state), lambda: trial.current)
        )
        await entered.wait()
        trial.cancel("SIGTERM")
        await asyncio.wait_for(stages, 10)

    asyncio.run(cancelled_in_vm())
    assert ran[-1] == "vm"
    assert (trial.stopping.cancelled_in, trial.stopping.cancelling) == ("vm", "SIGTERM")
