"""The worker inside the guest (placement `guest`): a whole model-driven trial in a real
QEMU guest (TCG here), its budget inside the guest, and a worker killed mid-trial."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.profiles import Profile, load_profile
from harness.trial.context import TrialOptions
from harness.trial.guestworker import CGROUP, GuestWorker
from harness.trial.pipeline import Trial, TrialResult
from harness.trial.stage import StageAction, TrialState
from receipts.audit import audit_and_read
from receipts.recordset import RecordSet
from tests.harness.trial.stagetable import around

pytestmark = pytest.mark.integration


def _profile() -> Profile:
    """tiny, with room for TCG: the guest runs the model ~10x slower than the host does,
    and on a shared 2-core machine slower still, so the per-request deadline is raised
    and the turns are capped (the test is about placement, not about the model)."""
    tiny = load_profile("tiny")
    return tiny.model_copy(
        update={
            "inference": tiny.inference.model_copy(update={"request_deadline_s": 600}),
            "agent": tiny.agent.model_copy(update={"max_turns": 2}),
        }
    )


def _options(tmp_path: Path) -> TrialOptions:
    return TrialOptions(
        profile=_profile(),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path,
        accel="tcg",
        placement="guest",
    )


def _records(result: TrialResult) -> RecordSet:
    audit, records = audit_and_read(result.receipt.read_bytes())
    assert audit.valid, audit.findings
    assert records is not None and records.trial is not None
    return records


def _all_released(records: RecordSet) -> None:
    assert records.trial is not None
    assert {c.status for c in records.cleanup} == {"confirmed"}
    assert "worker_process" in {c.resource for c in records.cleanup}
    assert not {"worker_socket", "worker_channel"} & {c.resource for c in records.cleanup}
    leftover = subprocess.run(
        ["pgrep", "-f", f"harness-vm-{records.trial.trial_id[:16]}"],
        capture_output=True,
        check=False,
    )
    assert leftover.returncode == 1, "no QEMU process of this trial is left"


class BudgetRecordingTrial(Trial):
    """Reads the guest worker's cgroup limit and listening sockets before the agent runs."""

    memory_max: bytes = b""
    listeners: str = ""

    def __init__(self, options: TrialOptions) -> None:
        super().__init__(options, stages=around("agent", self._agent))

    async def _agent(self, state: TrialState, run: StageAction) -> None:
        limit = await self.guests.agent.run(f"cat {CGROUP}/memory.max", 30.0)
        self.memory_max = limit.stdout.strip()
        tcp = await self.guests.agent.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", 30.0)
        self.listeners = tcp.stdout.decode()
        await run(state)


async def test_model_driven_trial_with_the_worker_in_the_guest(tmp_path: Path) -> None:
    trial = BudgetRecordingTrial(_options(tmp_path))
    result = await trial.run()
    assert result.valid
    records = _records(result)
    assert records.trial is not None and records.model is not None
    assert (records.trial.placement, records.trial.channel) == ("guest", "guest_loopback")
    worker = records.worker
    assert worker is not None and worker.category == "ok"
    assert (worker.placement, worker.channel) == ("guest", "guest_loopback")
    assert worker.requests >= 1 and worker.requests == len(records.worker_requests)
    assert worker.model_sha256 == records.model.gguf_sha256
    assert worker.peak_rss_bytes is not None and worker.peak_rss_bytes > 0
    assert records.agent is not None and records.agent.turns >= 1
    profile = _profile()
    assert trial.memory_max == str(profile.memory.worker_cgroup_limit).encode()
    # the worker listens on the guest's loopback only: 127.0.0.1:8080 (0100007F:1F90)
    listening = [line.split() for line in trial.listeners.splitlines()[1:] if line.strip()]
    ours = [f for f in listening if f[3] == "0A" and f[1].endswith(":1F90")]
    assert ours and all(f[1] == "0100007F:1F90" for f in ours)
    _all_released(records)


class WorkerKilledBeforeAgent(Trial):
    def __init__(self, options: TrialOptions) -> None:
        super().__init__(options, stages=around("agent", self._agent))

    async def _agent(self, state: TrialState, run: StageAction) -> None:
        assert (
            isinstance(self.prepared.worker, GuestWorker)
            and self.prepared.worker.process is not None
        )
        await self.guests.agent.run(f"kill -KILL {self.prepared.worker.process.pid}", 30.0)
        await run(state)


async def test_worker_killed_in_the_guest_is_named_and_cleaned_up(tmp_path: Path) -> None:
    result = await WorkerKilledBeforeAgent(_options(tmp_path)).run()
    assert result.valid
    records = _records(result)
    assert records.worker is not None and records.worker.category == "worker_exited"
    assert result.verdict == "failed_worker"
    assert records.trial is not None
    assert records.trial.failed_stage == "worker"
    _all_released(records)
