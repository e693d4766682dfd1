"""The pipeline's own checks, without a VM: what `bundle()` keeps after a failure, the
exit status for a receipt that does not audit, a defect of ours inside a stage, and
what the agent and worker stages keep of what the guest wrote (test_verification.py:
the verifier's record).

The records fed to `bundle()` are the receipt builders' complete trials, so what these
tests see is the real writer and the real audit on realistic records; only the stages
that would have produced them in a guest are not run here (test_trial_faults.py runs
them in one).
"""

from __future__ import annotations

import asyncio
import json
import zipfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from harness.cli import main
from harness.profiles import Profile, load_profile
from harness.trial.context import TrialOptions
from harness.trial.guestdisk import parse_probe, probe_disk
from harness.trial.guestrun import agent_stage, stop_worker
from harness.trial.hostworker import HostWorker, HostWorkerProcess
from harness.trial.pipeline import Trial, TrialResult
from host.ssh import CommandResult
from host.ssh.errors import SshError
from receipts.audit import audit_and_read
from receipts.canonical import canonical
from receipts.records import (
    MemorySample,
)
from tests.harness.trial.collected import (
    MODEL,
    RUNTIME,
    SOLUTION,
    audit_exit,
    bundle,
    collect,
    in_guest,
    new_trial,
    run_stage,
)
from tests.harness.trial.guestfakes import ENDS, GuestEnded, GuestWrote, agent_file, ended
from tests.receipts.builders import accepted_model_trial, accepted_scripted_trial, replace


def _names(result: TrialResult) -> set[str]:
    with zipfile.ZipFile(result.receipt) as archive:
        return set(archive.namelist())


def test_a_complete_trial_bundles_as_accepted(tmp_path: Path) -> None:
    """The positive control for the tests below: the same records, nothing failed."""
    for scripted, records in (
        (True, accepted_scripted_trial()),
        (False, accepted_model_trial()),
    ):
        trial = new_trial(tmp_path, scripted)
        collect(trial, records)
        result = bundle(trial, records)
        assert (result.valid, result.verdict) == (True, "accepted")


def test_evidence_after_a_failed_vm_is_dropped(tmp_path: Path) -> None:
    """Mutation control for bundle()'s rule: keep gate/worker/agent/verification after a
    failed VM and the receipt no longer audits (record_unexpected)."""
    records = accepted_model_trial()
    assert records.vm is not None
    trial = new_trial(tmp_path, scripted=False)
    collect(trial, records, vm=replace(records.vm, category="qemu_exited"))
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_vm")
    names = _names(result)
    assert {"preflight.json", "model.json", "image.json", "vm.json"} <= names
    assert not names & {"gate.json", "worker.json", "agent.json", "verification.json"}
    assert not any(
        name.split("/")[0] in ("agent_turns", "tool_calls", "worker_requests") for name in names
    )


def test_evidence_after_a_stage_found_failed_later_is_dropped(tmp_path: Path) -> None:
    """The guest worker's death is read when it is stopped, after the agent ran: the
    verdict names the worker, and the agent's and verifier's records (written after the
    worker had failed) leave the claim. Mutation control: keep them and the receipt no
    longer audits (record_unexpected)."""
    records = accepted_model_trial()
    assert records.worker is not None
    trial = new_trial(tmp_path, scripted=False)
    collect(trial, records, worker=replace(records.worker, category="worker_exited"))
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_worker")
    names = _names(result)
    assert {"vm.json", "gate.json", "worker.json"} <= names
    assert not names & {"agent.json", "verification.json"}
    assert not any(name.split("/")[0] in ("agent_turns", "tool_calls") for name in names)
    assert any(name.split("/")[0] == "worker_requests" for name in names)


def test_a_crash_in_the_agent_stage_keeps_what_came_before(tmp_path: Path) -> None:
    records = accepted_model_trial()
    trial = new_trial(tmp_path, scripted=False)
    collect(trial, records)
    trial.crashed, trial.current = True, "agent"
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_internal")
    audit, read = audit_and_read(result.receipt.read_bytes())
    assert audit.valid and read is not None and read.trial is not None
    assert (read.trial.internal_error_stage, read.trial.failed_stage) == ("agent", "agent")
    assert read.worker is not None and len(read.worker_requests) == len(records.worker_requests)
    assert read.agent is None and read.verification is None and not read.agent_turns


def test_a_crash_before_a_stage_record_was_written_names_that_stage(tmp_path: Path) -> None:
    """The worker's record is written after the agent: a crash that leaves it unwritten is
    attributed to the worker stage, not to the stage that happened to be running."""
    records = accepted_model_trial()
    trial = new_trial(tmp_path, scripted=False)
    collect(trial, records, worker=None)
    trial.crashed, trial.current = True, "agent"
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_internal")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None
    assert read.trial.internal_error_stage == "worker"
    assert not read.worker_requests


def test_a_receipt_that_does_not_audit_exits_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline defect that leaves out a required record must not pass as its verdict:
    the CLI exits 4. The positive control (all records) exits per the verdict (0)."""
    records = accepted_scripted_trial()

    def fake_run(source: Any) -> Any:
        async def run(options: TrialOptions, progress: Any = None) -> tuple[TrialResult, None]:
            trial = Trial(options)
            collect(trial, records, source=source)
            return bundle(trial, records), None

        return run

    argv = ["trial", "--profile", "tiny", "--agent", f"scripted:{SOLUTION}", "--out", str(tmp_path)]
    monkeypatch.setattr("harness.commands.trial.run_trial_with_signals", fake_run(records.source))
    assert main(argv) == 0
    monkeypatch.setattr("harness.commands.trial.run_trial_with_signals", fake_run(None))
    # The writer does not refuse it; the audit does, and the exit status says so.
    assert main(argv) == 4


def test_an_exception_inside_a_stage_still_writes_a_valid_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real pipeline up to the image stage (preflight, source binding, host state),
    with a defect injected there: closed verdict, valid receipt, exit 3."""

    def defect(*_args: Any) -> Any:
        raise RuntimeError("injected harness defect")

    monkeypatch.setattr("harness.trial.stages.image_stage", defect)
    argv = [
        "trial",
        "--profile",
        "tiny",
        "--agent",
        f"scripted:{SOLUTION}",
        "--out",
        str(tmp_path),
        "--accel",
        "tcg",
        "--json",
    ]
    assert main(argv) == 3
    summary = json.loads(capsys.readouterr().out)
    assert (summary["verdict"], summary["valid"]) == ("failed_internal", True)
    audit, read = audit_and_read(Path(summary["receipt"]).read_bytes())
    assert audit.valid and read is not None and read.trial is not None
    assert (read.trial.internal_error_stage, read.trial.failed_stage) == ("image", "image")
    assert read.preflight is not None and read.source is not None and read.image is None
    # memory.json is written whatever the end: host figures from the first sample to
    # the last (taken before teardown); no VM or worker cgroup ever existed here
    memory = read.memory
    assert memory is not None and memory.schema_ == "harness.receipt.memory/2"
    assert len(memory.samples) >= 2
    for sample in memory.samples:
        assert isinstance(sample, MemorySample)
        assert sample.host_available_bytes is not None and sample.host_available_bytes > 0
        assert sample.host_page_cache_bytes is not None
        assert sample.qemu_usage_bytes is None and sample.worker_working_set_bytes is None


@pytest.mark.parametrize(
    ("exit_status", "stdout", "state"),
    [
        (0, b"0 4096 1000\n", "full"),
        (0, b"255 4096 1000\n", "full"),
        (0, b"256 4096 1000\n", "not_full"),
        (0, b"900000 4096 0\n", "full"),
        (0, b"900000 4096 1000\n", "not_full"),
        (1, b"", "unread"),
        (None, b"0 4096 1000\n", "unread"),
        (0, b"garbage\n", "unread"),
        (0, b"-1 4096 1000\n", "unread"),
        (0, b"0 0 1000\n", "unread"),
    ],
)
def test_disk_probe_has_three_answers(exit_status: int | None, stdout: bytes, state: str) -> None:
    assert parse_probe(ended(exit_status, stdout)) == state


def test_probe_of_a_lost_connection_is_unread() -> None:
    async def dropped(command: str, deadline_s: float) -> CommandResult:
        raise SshError("connection_dropped")

    assert asyncio.run(probe_disk(dropped)) == "unread"


# ---- what the guest wrote, read by the real stages (a fake guest, no VM) ------------------


def _agent_stage(trial: Trial) -> Callable[[], Coroutine[Any, Any, None]]:
    """The real agent stage, in the trial's agent guest."""
    return lambda: agent_stage(
        context=trial.context,
        runtime=RUNTIME,
        worker=trial.prepared.worker,
        model=MODEL,
        guest=trial.guests.agent,
        evidence=trial.evidence,
    )


def test_the_agent_file_as_written_is_kept(tmp_path: Path) -> None:
    """The positive control for the refusals below: same fake guest, intact file."""
    records = accepted_model_trial()
    trial = in_guest(tmp_path, GuestWrote({"/work/agent.json": agent_file(records)}))
    assert not run_stage(_agent_stage(trial))
    assert trial.evidence.collected().agent == records.agent
    assert trial.evidence.turns == records.agent_turns


@pytest.mark.parametrize("damage", ["duplicate_key", "not_an_object", "truncated", "too_large"])
def test_an_agent_file_that_does_not_read_fails_the_agent_stage(
    tmp_path: Path, damage: str
) -> None:
    """json.loads would take the duplicate (the last `agent` wins), and the other three
    would raise out of the stage, ending the trial `failed_internal` (our defect) or as a
    lost SSH connection. The agent stage fails as `records_invalid`, nothing of the file
    is kept, and the receipt audits. Mutation controls: the stage without its
    GuestOutputInvalid handler, or `records_invalid` outside AGENT_FAILURES, fails this."""
    records = accepted_model_trial()
    assert records.agent is not None
    good = agent_file(records)
    crashed = canonical(records.agent.model_copy(update={"category": "agent_crashed"}).to_json())
    data: bytes | None = {
        "duplicate_key": b'{"agent":' + crashed + b"," + good[1:],
        "not_an_object": b"[" + good + b"]",
        "truncated": good[:-1],
        "too_large": None,
    }[damage]
    trial = in_guest(tmp_path, GuestWrote({"/work/agent.json": data}))
    assert run_stage(_agent_stage(trial))
    agent = trial.evidence.collected().agent
    assert agent is not None
    assert (agent.category, agent.turns, agent.policy) == ("records_invalid", 0, "model")
    assert trial.evidence.turns == () and trial.evidence.tool_calls == ()
    collect(trial, records, agent=agent, verification=None)
    trial.evidence.turns, trial.evidence.tool_calls = (), ()
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_agent")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None and read.agent is not None
    assert (read.trial.failed_stage, read.trial.internal_error_stage) == ("agent", None)
    assert read.agent.category == "records_invalid" and read.verification is None


def test_host_worker_records_that_do_not_read_fail_the_worker_stage(tmp_path: Path) -> None:
    """The host worker's records file with a truncated last line is `records_invalid`, not
    a ValidationError out of stop_worker (failed_internal at the worker stage)."""
    records = accepted_model_trial()
    lines = b"".join(r.canonical_bytes() + b"\n" for r in records.worker_requests)
    path = tmp_path / "worker-records.jsonl"
    path.write_bytes(lines[:-7])

    class _Unreadable:
        def read_memory(self) -> None:
            raise OSError("no cgroup in this test")

    trial = new_trial(tmp_path, scripted=False)
    trial.prepared.worker = host_worker = HostWorker()
    host_worker.process = HostWorkerProcess(
        None, 0, cast(Any, _Unreadable()), tmp_path / "api.sock", path, "a" * 64, 1, 0.0
    )
    asyncio.run(stop_worker(host_worker, trial.owned, trial.evidence))
    worker = trial.evidence.collected().worker
    assert worker is not None
    assert (worker.category, worker.requests) == ("records_invalid", 0)
    assert trial.evidence.worker_requests == ()
    collect(trial, records, worker=worker, agent=None, verification=None)
    trial.evidence.worker_requests = ()
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_worker")


# ---- a gated guest command that ends without a record (a fake guest, no VM) ---------------


@pytest.mark.parametrize("end", sorted(ENDS))
def test_an_agent_command_that_ends_without_a_record_is_named(
    tmp_path: Path, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent stage's record is the host's reading of how the command ended, counts 0,
    and the receipt audits (exit 0) as failed_agent with every cleanup receipt confirmed
    (without that record: evidence_incomplete, record_missing, CLI exit 4). A complete
    agent.json left on the guest is not read (a refused gate's exit is not the agent's).
    Mutation controls: the stage without its `failure is not None` branch fails every
    case (the left-behind file is read, or StageFailed is not raised); `deadline_exceeded`
    without its handler raises SshError."""
    records = accepted_model_trial()
    guest = GuestEnded(ENDS[end], {"/work/agent.json": agent_file(records)})
    trial = in_guest(tmp_path, guest)
    assert run_stage(_agent_stage(trial))
    agent = trial.evidence.collected().agent
    assert agent is not None
    assert (agent.category, agent.turns, agent.tool_calls, agent.policy) == (end, 0, 0, "model")
    assert trial.evidence.turns == () and trial.evidence.tool_calls == ()
    collect(trial, records, agent=agent, verification=None)
    trial.evidence.turns, trial.evidence.tool_calls = (), ()
    result = bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_agent")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None and read.agent is not None
    assert (read.trial.failed_stage, read.trial.internal_error_stage) == ("agent", None)
    assert read.agent.category == end and read.verification is None
    assert read.cleanup and {c.status for c in read.cleanup} == {"confirmed"}
    assert audit_exit(result.receipt, capsys) == 0


def test_a_deadline_after_qemu_exited_is_left_to_the_vm(tmp_path: Path) -> None:
    """The host's deadline passing while QEMU is gone is not the agent's doing: the SSH
    error goes on to the pipeline, which names the VM (`qemu_exited`), and no agent record
    is kept. Mutation control: without the `_vm_gone()` check the stage records
    `deadline_exceeded` instead."""
    guest = GuestEnded(SshError("command_timeout"), {})

    async def gone() -> bool:
        return True

    guest.gone = gone  # type: ignore[method-assign]
    trial = in_guest(tmp_path, guest)
    with pytest.raises(SshError):
        asyncio.run(_agent_stage(trial)())
    assert trial.evidence.collected().agent is None


@pytest.mark.parametrize(
    ("scripted", "tool_choice", "policy"),
    [
        (True, "auto", "scripted"),
        (False, "auto", "model"),
        (False, "required", "model_tool_required"),
    ],
)
def test_the_trial_record_names_the_policy_the_agent_ran(
    tmp_path: Path, *, scripted: bool, tool_choice: str, policy: str
) -> None:
    # Found by the real-size qwen4b run: with tool_choice = required the agent record
    # said model_tool_required and trial.json said model, so the audit refused the
    # receipt (policy_mismatch).
    data = load_profile("tiny").model_dump(by_alias=True)
    data["agent"]["tool_choice"] = tool_choice
    trial = Trial(
        TrialOptions(
            profile=Profile.model_validate(data),
            task="py-one-line-fix",
            script=SOLUTION if scripted else None,
            out_dir=tmp_path,
            accel="tcg",
        )
    )
    assert trial.trial_record(1_790_000_000_000).policy == policy == trial.policy
