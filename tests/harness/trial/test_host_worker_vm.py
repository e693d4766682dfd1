"""The worker on the host (placement `host`) ending while the agent runs: a whole
model-driven trial in a real QEMU guest (TCG here) with the real llama.cpp worker,
which a signal ends after it has answered the agent's first request."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.hostworker import HostWorker
from harness.trial.pipeline import Trial
from harness.trial.stage import StageAction, TrialState
from tests.harness.trial.stagetable import around
from tests.harness.trial.test_trial_vm import _no_leftovers, _records

pytestmark = pytest.mark.integration

FIRST_REQUEST_DEADLINE_S = 300.0


class WorkerEndsDuringAgent(Trial):
    """Sends `signum` to the host worker process once its first request record is
    written, while the agent stage runs, and remembers what it found."""

    signum: signal.Signals = signal.SIGKILL
    sent_during_agent = False
    in_worker_cgroup = False

    async def _end_worker(self) -> None:
        assert (
            isinstance(self.prepared.worker, HostWorker)
            and self.prepared.worker.process is not None
        )
        deadline = asyncio.get_running_loop().time() + FIRST_REQUEST_DEADLINE_S
        while asyncio.get_running_loop().time() < deadline:
            records = self.prepared.worker.process.records
            if records.exists() and records.read_bytes().strip():
                break
            await asyncio.sleep(0.05)
        pid = self.prepared.worker.process.popen_pid
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        self.in_worker_cgroup = f"/worker-{self.context.tag}\n" in cgroups
        os.kill(pid, self.signum)
        self.sent_during_agent = True

    def __init__(self, options: TrialOptions) -> None:
        super().__init__(options, stages=around("agent", self._agent))

    async def _agent(self, state: TrialState, run: StageAction) -> None:
        ender = asyncio.create_task(self._end_worker())
        try:
            await run(state)
        finally:
            if not ender.done():
                ender.cancel()  # the agent ended before a first request was recorded
            await asyncio.gather(ender, return_exceptions=True)


class WorkerTerminatedDuringAgent(WorkerEndsDuringAgent):
    """SIGTERM: the worker shuts down in order and exits 0, as if on its own."""

    signum = signal.SIGTERM


@pytest.mark.parametrize(
    ("trial_class", "exit_status"),
    [(WorkerEndsDuringAgent, -signal.SIGKILL), (WorkerTerminatedDuringAgent, 0)],
)
async def test_host_worker_ending_during_the_agent_is_worker_exited(
    tmp_path: Path, trial_class: type[WorkerEndsDuringAgent], exit_status: int
) -> None:
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path,
        accel="tcg",
        placement="host",
    )
    trial = trial_class(options)
    result = await trial.run()
    assert trial.sent_during_agent, "the signal was sent while the agent ran"
    assert trial.in_worker_cgroup, "the PID signalled was the worker in its cgroup"
    assert (
        isinstance(trial.prepared.worker, HostWorker) and trial.prepared.worker.process is not None
    )
    assert trial.prepared.worker.process.exit_status == exit_status
    assert result.valid
    records = _records(result)
    assert (records.trial.placement, records.trial.channel) == ("host", "guestfwd_unix")
    assert records.worker is not None
    assert (records.worker.category, records.worker.oom_kills) == ("worker_exited", 0)
    assert records.worker.requests >= 1
    assert records.worker.requests == len(records.worker_requests)
    assert result.verdict == "failed_worker"
    assert records.trial.failed_stage == "worker"
    assert {"worker_process", "worker_socket", "cgroup"} <= {c.resource for c in records.cleanup}
    _no_leftovers(result)
