"""The trial as a table of stages, in the order they run.

Each row names its stage, the deadline the progress display shows, and what it does;
its function is handed only the parts of the trial's state (stage.py) it may touch.
Which rows a trial runs is receipts/verdict.py's `trial_stages`, the answer the audit
requires records by; the rows are in `STAGE_ORDER`, the records' own order.
"""

from __future__ import annotations

from typing import Final

from harness.trial.guestboot import vm_stage
from harness.trial.guestrun import (
    GATE_DEADLINE_S,
    agent_stage,
    gate_stage,
    stop_worker,
    worker_stage,
)
from harness.trial.hoststages import (
    dispatch_stage,
    image_stage,
    model_stage,
    preflight_stage,
    source_stage,
)
from harness.trial.stage import StageSpec, TrialState
from harness.trial.verification import Verification
from host.cancel import in_thread


async def _preflight(s: TrialState) -> None:
    preflight_stage(s.context.profile, s.context.options.cache, s.evidence)


async def _source(s: TrialState) -> None:
    source_stage(s.context.dispatched, s.evidence)


async def _dispatch(s: TrialState) -> None:
    dispatch_stage(s.context.options, s.evidence)


async def _model(s: TrialState) -> None:
    await in_thread(model_stage, s.context.options, s.prepared, s.evidence)


async def _image(s: TrialState) -> None:
    await in_thread(image_stage, s.context.options.cache, s.prepared, s.evidence)


async def _vm(s: TrialState) -> None:
    await vm_stage(s.context, s.scratch, s.owned, s.prepared, s.guests.agent)


async def _gate(s: TrialState) -> None:
    s.verifier.begin_beside_agent()  # when the host's memory holds both guests
    await gate_stage(s.prepared.runtime, s.guests.agent, s.evidence)


async def _worker(s: TrialState) -> None:
    await worker_stage(
        context=s.context,
        scratch=s.scratch,
        owned=s.owned,
        worker=s.prepared.worker,
        model=s.prepared.model,
        guest=s.guests.agent,
        evidence=s.evidence,
    )


async def _agent(s: TrialState) -> None:
    await agent_stage(
        context=s.context,
        runtime=s.prepared.runtime,
        worker=s.prepared.worker,
        model=s.prepared.model,
        guest=s.guests.agent,
        evidence=s.evidence,
    )


async def _stop_worker(s: TrialState) -> None:
    agent_cli = s.context.agent.sha256 is not None
    await stop_worker(s.prepared.worker, s.owned, s.evidence, agent_cli=agent_cli)


async def _verification(s: TrialState) -> None:
    await Verification.of(s).run()


def _provisioning(s: TrialState) -> float:
    return float(s.context.profile.provisioning.deadline_s)


def _ssh(s: TrialState) -> float:
    return float(s.context.profile.vm.ssh_deadline_s)


def _gate_deadline(_s: TrialState) -> float:
    return GATE_DEADLINE_S


def _worker_ready(s: TrialState) -> float:
    assert s.prepared.worker is not None
    return s.prepared.worker.ready_deadline_s


def _agent_wall(s: TrialState) -> float:
    return float(s.context.profile.agent.wall_deadline_s)


STAGES: Final[tuple[StageSpec, ...]] = (
    StageSpec("preflight", _preflight),
    StageSpec("source", _source),
    StageSpec("dispatch", _dispatch),
    StageSpec("model", _model, deadline_s=_provisioning),
    StageSpec("image", _image, deadline_s=_provisioning),
    StageSpec("vm", _vm, deadline_s=_ssh),
    StageSpec("gate", _gate, deadline_s=_gate_deadline),
    StageSpec("worker", _worker, deadline_s=_worker_ready),
    StageSpec("agent", _agent, deadline_s=_agent_wall, after=_stop_worker),
    StageSpec("verification", _verification),
)
"""Every stage a trial can run. The worker stops after the agent, however the agent
ended, and before verification (its records are final only once it has exited)."""
