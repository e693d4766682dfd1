"""The pipeline's own checks, without a VM: what `bundle()` keeps after a failure, the
exit status for a receipt that does not audit, and a defect of ours inside a stage.

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
from types import SimpleNamespace
from typing import Any, cast

import pytest

from guest.task import task_digest
from harness.cli import main
from harness.profiles import Profile, load_profile
from harness.trial.context import TrialOptions
from harness.trial.evidence import StageFailed
from harness.trial.guestdisk import parse_probe, probe_disk
from harness.trial.guestrun import agent_stage, stop_worker
from harness.trial.guests import Guest
from harness.trial.hostworker import HostWorker, HostWorkerProcess
from harness.trial.pipeline import Trial, TrialResult
from harness.trial.verification import judge
from host.release import CleanupResult
from host.ssh import CommandResult
from host.ssh.errors import SshError
from receipts.audit import audit_and_read
from receipts.canonical import canonical
from receipts.records import (
    HostStateRecord,
    MemorySample,
    ToolCallRecord,
    VerificationRecord,
    WorkerRequestRecord,
)
from receipts.recordset import RecordSet
from tests.harness.trial.guestfakes import agent_file, ended
from tests.receipts.builders import accepted_model_trial, accepted_scripted_trial, replace

TASKS = Path(__file__).parents[3] / "profiles" / "tasks"
SOLUTION = TASKS / "py-one-line-fix" / "scripts" / "solution.json"
VERIFIED_TREE = "1" * 64
"""The builders' verification record's `workspace_sha256`: what the host carried there."""
STAGE_SINGLES = ("preflight", "source", "model", "image", "vm", "gate", "worker", "agent")


def _trial(tmp_path: Path, scripted: bool) -> Trial:
    return Trial(
        TrialOptions(
            profile=load_profile("tiny"),
            task="py-one-line-fix",
            script=SOLUTION if scripted else None,
            out_dir=tmp_path,
            accel="tcg",
        )
    )


def _collect(trial: Trial, records: RecordSet, **singles: Any) -> None:
    """Give the trial what its stages would have collected."""
    for name in (*STAGE_SINGLES, "verification"):
        value = singles.get(name, getattr(records, name))
        if value is not None:
            trial.evidence.put(name, value)
    calls = tuple(c for c in records.tool_calls if isinstance(c, ToolCallRecord))
    assert len(calls) == len(records.tool_calls), "a trial collects current records only"
    trial.evidence.turns, trial.evidence.tool_calls = records.agent_turns, calls
    requests = tuple(r for r in records.worker_requests if isinstance(r, WorkerRequestRecord))
    assert len(requests) == len(records.worker_requests), "a trial collects current records only"
    trial.evidence.worker_requests = requests


def _bundle(trial: Trial, records: RecordSet) -> TrialResult:
    cleanup = [
        CleanupResult(c.resource, c.status, c.evidence, c.duration_ms) for c in records.cleanup
    ]
    assert isinstance(records.hoststate, HostStateRecord)
    return trial.bundle(1_790_000_000_000, cleanup, records.hoststate)


def _names(result: TrialResult) -> set[str]:
    with zipfile.ZipFile(result.receipt) as archive:
        return set(archive.namelist())


def test_a_complete_trial_bundles_as_accepted(tmp_path: Path) -> None:
    """The positive control for the tests below: the same records, nothing failed."""
    for scripted, records in ((True, accepted_scripted_trial()), (False, accepted_model_trial())):
        trial = _trial(tmp_path, scripted)
        _collect(trial, records)
        result = _bundle(trial, records)
        assert (result.valid, result.verdict) == (True, "accepted")


def test_evidence_after_a_failed_vm_is_dropped(tmp_path: Path) -> None:
    """Mutation control for bundle()'s rule: keep gate/worker/agent/verification after a
    failed VM and the receipt no longer audits (record_unexpected)."""
    records = accepted_model_trial()
    assert records.vm is not None
    trial = _trial(tmp_path, scripted=False)
    _collect(trial, records, vm=replace(records.vm, category="qemu_exited"))
    result = _bundle(trial, records)
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
    trial = _trial(tmp_path, scripted=False)
    _collect(trial, records, worker=replace(records.worker, category="worker_exited"))
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_worker")
    names = _names(result)
    assert {"vm.json", "gate.json", "worker.json"} <= names
    assert not names & {"agent.json", "verification.json"}
    assert not any(name.split("/")[0] in ("agent_turns", "tool_calls") for name in names)
    assert any(name.split("/")[0] == "worker_requests" for name in names)


def test_a_crash_in_the_agent_stage_keeps_what_came_before(tmp_path: Path) -> None:
    records = accepted_model_trial()
    trial = _trial(tmp_path, scripted=False)
    _collect(trial, records)
    trial.crashed, trial.current = True, "agent"
    result = _bundle(trial, records)
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
    trial = _trial(tmp_path, scripted=False)
    _collect(trial, records, worker=None)
    trial.crashed, trial.current = True, "agent"
    result = _bundle(trial, records)
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
            _collect(trial, records, source=source)
            return _bundle(trial, records), None

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


class _FakeVm:
    """Serves the guest's files: `get` writes the bytes set for that path, or refuses a
    file over the transfer limit as the real SSH client does."""

    def __init__(self, files: dict[str, bytes | None]) -> None:
        self.files = files

    async def put(self, local: Path, remote: str, deadline_s: float) -> None:
        return None

    async def get(self, remote: str, local: Path, deadline_s: float) -> int:
        data = self.files[remote]
        if data is None:
            raise SshError("transfer_too_large")
        local.write_bytes(data)
        return len(data)


class _GuestWrote(Guest):
    """A guest whose commands all exit 0 and whose files are given bytes."""

    def __init__(self, files: dict[str, bytes | None]) -> None:
        super().__init__()
        self.handle = cast(Any, SimpleNamespace(vm=_FakeVm(files)))

    async def run(
        self, command: str, deadline_s: float, stdin: bytes | None = None
    ) -> CommandResult:
        return ended(0, b"")


RUNTIME = cast(Any, SimpleNamespace(pins_sha256="c" * 64))
MODEL = cast(Any, SimpleNamespace(record=SimpleNamespace(gguf_sha256="a" * 64)))


def _in_guest(tmp_path: Path, guest: Guest) -> Trial:
    """A model-driven trial whose agent guest is `guest`."""
    trial = Trial(_options(tmp_path))
    trial.guests.agent = guest
    return trial


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


def _judge(trial: Trial, carried_sha256: str) -> Callable[[], Coroutine[Any, Any, None]]:
    """The real judging of the verifier's record; the trial's agent guest stands in for
    the verification guest."""
    return lambda: judge(trial.context, RUNTIME, trial.guests.agent, carried_sha256, trial.evidence)


def _run_stage(stage: Callable[[], Coroutine[Any, Any, None]]) -> bool:
    """Run one stage; whether it ended the trial (StageFailed)."""
    try:
        asyncio.run(stage())
    except StageFailed:
        return True
    return False


def _options(tmp_path: Path) -> TrialOptions:
    return TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path,
        accel="tcg",
    )


def test_the_agent_file_as_written_is_kept(tmp_path: Path) -> None:
    """The positive control for the refusals below: same fake guest, intact file."""
    records = accepted_model_trial()
    trial = _in_guest(tmp_path, _GuestWrote({"/work/agent.json": agent_file(records)}))
    assert not _run_stage(_agent_stage(trial))
    assert trial.evidence.collected().agent == records.agent
    assert trial.evidence.turns == records.agent_turns


@pytest.mark.parametrize("damage", ["duplicate_key", "not_an_object", "truncated", "too_large"])
def test_an_agent_file_that_does_not_read_fails_the_agent_stage(
    tmp_path: Path, damage: str
) -> None:
    """Before: json.loads took the duplicate (the last `agent` wins), and the other three
    raised out of the stage, so the trial ended `failed_internal` (our defect) or as a lost
    SSH connection. Now the agent stage fails as `records_invalid`, nothing of the file is
    kept, and the receipt audits. Mutation controls: the stage without its
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
    trial = _in_guest(tmp_path, _GuestWrote({"/work/agent.json": data}))
    assert _run_stage(_agent_stage(trial))
    agent = trial.evidence.collected().agent
    assert agent is not None
    assert (agent.category, agent.turns, agent.policy) == ("records_invalid", 0, "model")
    assert trial.evidence.turns == () and trial.evidence.tool_calls == ()
    _collect(trial, records, agent=agent, verification=None)
    trial.evidence.turns, trial.evidence.tool_calls = (), ()
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_agent")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None and read.agent is not None
    assert (read.trial.failed_stage, read.trial.internal_error_stage) == ("agent", None)
    assert read.agent.category == "records_invalid" and read.verification is None


@pytest.mark.parametrize("damage", ["duplicate_key", "empty", "not_the_record"])
def test_a_verification_file_that_does_not_read_fails_verification(
    tmp_path: Path, damage: str
) -> None:
    """A failed run with a second `"result":"passed"` appended would have passed under
    json.loads; the others would have crashed the trial. Now: `records_invalid`, no
    digest, `failed_verification`, a receipt that audits."""
    records = accepted_model_trial()
    assert records.verification is not None
    failed = records.verification.model_copy(
        update={"result": "failed", "tests_failed": 1}
    ).canonical_bytes()
    data = {
        "duplicate_key": failed[:-1] + b',"result":"passed"}',
        "empty": b"",
        "not_the_record": records.worker_requests[0].canonical_bytes(),
    }[damage]
    trial = _in_guest(tmp_path, _GuestWrote({"/work/verification.json": data}))
    assert _run_stage(_judge(trial, VERIFIED_TREE))
    verification = trial.evidence.collected().verification
    assert verification is not None
    assert verification.category == "records_invalid" and verification.result == "failed"
    assert verification.task_sha256 is None
    _collect(trial, records, verification=verification)
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_verification")


def test_host_worker_records_that_do_not_read_fail_the_worker_stage(tmp_path: Path) -> None:
    """The host worker's records file with a truncated last line: before, a ValidationError
    out of stop_worker (failed_internal at the worker stage); now `records_invalid`."""
    records = accepted_model_trial()
    lines = b"".join(r.canonical_bytes() + b"\n" for r in records.worker_requests)
    path = tmp_path / "worker-records.jsonl"
    path.write_bytes(lines[:-7])

    class _Unreadable:
        def read_memory(self) -> None:
            raise OSError("no cgroup in this test")

    trial = _trial(tmp_path, scripted=False)
    trial.prepared.worker = host_worker = HostWorker()
    host_worker.process = HostWorkerProcess(
        None, 0, cast(Any, _Unreadable()), tmp_path / "api.sock", path, "a" * 64, 1, 0.0
    )
    asyncio.run(stop_worker(host_worker, trial.owned, trial.evidence))
    worker = trial.evidence.collected().worker
    assert worker is not None
    assert (worker.category, worker.requests) == ("records_invalid", 0)
    assert trial.evidence.worker_requests == ()
    _collect(trial, records, worker=worker, agent=None, verification=None)
    trial.evidence.worker_requests = ()
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_worker")


# ---- a gated guest command that ends without a record (a fake guest, no VM) ---------------

GATE_OK = b'HARNESS-GATE {"category":"ok","files_verified":12,"pin_table_sha256":"' + b"c" * 64
GATE_REFUSED = GATE_OK.replace(b'"ok"', b'"digest_mismatch"')

ENDS: dict[str, CommandResult | SshError] = {
    "gate_refused": ended(3, GATE_REFUSED + b'"}\n'),
    "killed_by_signal": CommandResult(None, "KILL", GATE_OK + b'"}\n', b"", False, False, 1),
    "deadline_exceeded": SshError("command_timeout"),
    "exited_nonzero": ended(1, GATE_OK + b'"}\n'),
}
"""How the gated command ends, one per category, as the SSH client reports it."""


class _GuestEnded(_GuestWrote):
    """A guest whose gated command (`guest.agent` / `guest.verify`) ends as given; every
    other command exits 0. The guest's files are still served, so a record the command
    may have left behind is there to be (wrongly) read."""

    def __init__(self, end: CommandResult | SshError, files: dict[str, bytes | None]) -> None:
        super().__init__(files)
        self.end = end

    async def run(
        self, command: str, deadline_s: float, stdin: bytes | None = None
    ) -> CommandResult:
        if "guest.agent" not in command and "guest.verify" not in command:
            return ended(0, b"")
        if isinstance(self.end, SshError):
            raise self.end
        return self.end


def _audit_exit(receipt: Path, capsys: pytest.CaptureFixture[str]) -> int:
    status = main(["audit", str(receipt)])
    capsys.readouterr()
    return status


@pytest.mark.parametrize("end", sorted(ENDS))
def test_an_agent_command_that_ends_without_a_record_is_named(
    tmp_path: Path, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: StageFailed with no agent record, so the verdict was evidence_incomplete and
    the receipt did not audit (record_missing, CLI exit 4). Now the agent stage's record is
    the host's reading of how the command ended, counts 0, and the receipt audits (exit 0)
    as failed_agent with every cleanup receipt confirmed. A complete agent.json left on the
    guest is not read (a refused gate's exit is not the agent's). Mutation controls: the
    stage without its `failure is not None` branch fails every case (the left-behind file
    is read, or StageFailed is not raised); `deadline_exceeded` without its handler raises
    SshError."""
    records = accepted_model_trial()
    guest = _GuestEnded(ENDS[end], {"/work/agent.json": agent_file(records)})
    trial = _in_guest(tmp_path, guest)
    assert _run_stage(_agent_stage(trial))
    agent = trial.evidence.collected().agent
    assert agent is not None
    assert (agent.category, agent.turns, agent.tool_calls, agent.policy) == (end, 0, 0, "model")
    assert trial.evidence.turns == () and trial.evidence.tool_calls == ()
    _collect(trial, records, agent=agent, verification=None)
    trial.evidence.turns, trial.evidence.tool_calls = (), ()
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_agent")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None and read.agent is not None
    assert (read.trial.failed_stage, read.trial.internal_error_stage) == ("agent", None)
    assert read.agent.category == end and read.verification is None
    assert read.cleanup and {c.status for c in read.cleanup} == {"confirmed"}
    assert _audit_exit(result.receipt, capsys) == 0


@pytest.mark.parametrize("end", sorted(ENDS))
def test_a_verify_command_that_ends_without_a_record_is_named(
    tmp_path: Path, end: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As for the agent: before, no verification record and an invalid receipt; now the
    host's reading, result failed, no digests, failed_verification, a receipt that audits.
    A passing verification.json left on the guest is not read."""
    records = accepted_model_trial()
    assert records.verification is not None
    guest = _GuestEnded(
        ENDS[end], {"/work/verification.json": records.verification.canonical_bytes()}
    )
    trial = _in_guest(tmp_path, guest)
    assert _run_stage(_judge(trial, VERIFIED_TREE))
    verification = trial.evidence.collected().verification
    assert verification is not None
    assert (verification.category, verification.result) == (end, "failed")
    assert verification.task_sha256 is None and verification.final_diff_sha256 is None
    _collect(trial, records, verification=verification)
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_verification")
    _, read = audit_and_read(result.receipt.read_bytes())
    assert read is not None and read.trial is not None and read.verification is not None
    assert read.trial.failed_stage == "verification" and read.verification.category == end
    assert read.cleanup and {c.status for c in read.cleanup} == {"confirmed"}
    assert _audit_exit(result.receipt, capsys) == 0


def test_a_deadline_after_qemu_exited_is_left_to_the_vm(tmp_path: Path) -> None:
    """The host's deadline passing while QEMU is gone is not the agent's doing: the SSH
    error goes on to the pipeline, which names the VM (`qemu_exited`), and no agent record
    is kept. Mutation control: without the `_vm_gone()` check the stage records
    `deadline_exceeded` instead."""
    guest = _GuestEnded(SshError("command_timeout"), {})

    async def gone() -> bool:
        return True

    guest.gone = gone  # type: ignore[method-assign]
    trial = _in_guest(tmp_path, guest)
    with pytest.raises(SshError):
        asyncio.run(_agent_stage(trial)())
    assert trial.evidence.collected().agent is None


def _of_this_task(records: RecordSet) -> VerificationRecord:
    """The builders' passing verification, about the task these trials run."""
    assert isinstance(records.verification, VerificationRecord)
    digest = task_digest(TASKS / "py-one-line-fix")
    return records.verification.model_copy(update={"task_sha256": digest})


def test_a_verification_of_the_carried_workspace_is_kept(tmp_path: Path) -> None:
    """Positive control for the next test: the verifier's record names the tree the host
    carried, and it is kept as written."""
    verification = _of_this_task(accepted_model_trial())
    assert verification.workspace_sha256 == VERIFIED_TREE
    written: dict[str, bytes | None] = {"/work/verification.json": verification.canonical_bytes()}
    trial = _in_guest(tmp_path, _GuestWrote(written))
    assert not _run_stage(_judge(trial, VERIFIED_TREE))
    assert trial.evidence.collected().verification == verification


def test_a_verification_of_another_workspace_is_not_a_pass(tmp_path: Path) -> None:
    """A passing record about other bytes than the host carried (a verifier that was fed,
    or claims, another tree) is `workspace_mismatch`, failed, and the receipt audits as
    failed_verification. Mutation control: without the digest comparison in
    judge the passing record is kept."""
    records = accepted_model_trial()
    expected = _of_this_task(records)
    written: dict[str, bytes | None] = {"/work/verification.json": expected.canonical_bytes()}
    trial = _in_guest(tmp_path, _GuestWrote(written))
    assert _run_stage(_judge(trial, "2" * 64))
    verification = trial.evidence.collected().verification
    assert verification is not None
    assert (verification.category, verification.result) == ("workspace_mismatch", "failed")
    _collect(trial, records, verification=verification)
    result = _bundle(trial, records)
    assert (result.valid, result.verdict) == (True, "failed_verification")


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
