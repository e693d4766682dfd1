"""`harness trial`: one trial end to end, one receipt ZIP, one verdict.

Stages run in the design's order and each leaves a closed record; the first failure
ends the run with its category, and teardown and bundling still run. Owned resources
are released in reverse order with one cleanup receipt each, the host state is
compared, the verdict is derived from the records by the same code the audit uses,
and the bundle is audited before it is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from guest.task import load_task, task_digest
from harness.dispatch import DispatchRefused, SuiteMembership, admit, ledger_dir
from harness.profiles import Profile
from harness.profiles.load import PROFILES_DIR
from harness.source import bind_source
from harness.trial.carry import CarryRefused, tar_command, unpack_workspace
from harness.trial.diskfiles import REPO, link_or_copy
from harness.trial.guestcmd import (
    GATE_SOURCE,
    READ_ONLY,
    command_failure,
    gated_command,
    parse_gate_line,
)
from harness.trial.guestdisk import probe_disk
from harness.trial.guestrecords import (
    GuestOutputInvalid,
    read_agent_output,
    read_verification,
    unread_agent_record,
    unread_verification_record,
)
from harness.trial.hoststate import host_state_record, unread_snapshot
from harness.trial.memsampler import MemorySampler, memory_dir_of_pid
from harness.trial.modelstage import PreparedModel, prepare
from harness.trial.owned import OwnedResources, Release
from harness.trial.placement import resolve_placement, worker_for
from harness.trial.preflight import preflight
from harness.trial.progress import NoProgress, ProgressSink, TrialStep
from harness.trial.vmstage import (
    DiskPlan,
    VmHandle,
    VmStageFailed,
    start_verifier_vm,
    start_vm,
    verifier_memory_bytes,
    vm_record,
)
from harness.trial.worker import Worker, WorkerLaunch, WorkerStageFailed
from harness.version import HARNESS_VERSION
from host.cancel import Cancelled, CancelToken, cancel_scope, in_thread
from host.hoststate.attribution import OwnTrial
from host.hoststate.others import live_trial_tags
from host.hoststate.snapshot import HostSnapshot, take_snapshot
from host.image.build import GuestImage, ensure_image, failure_record
from host.image.errors import ImageError
from host.release import CleanupResult, remove_dir
from host.runtime import GuestRuntime, RuntimeBuildError, RuntimeFailure, build_runtime
from host.ssh import CommandResult, SshSession
from host.ssh.errors import SshError
from host.vm.backend import Vm, VmBackend
from host.vm.categories import Accelerator, AcceleratorReason, AccelRequest
from host.vm.errors import VmError
from host.vm.guest import GuestVm
from host.vm.lease import TrialLease
from host.vm.libvirt_backend import LibvirtBackend
from host.vm.qemu import QemuBackend
from receipts.audit import audit_bytes
from receipts.bundle import WrittenBundle, write_bundle
from receipts.claim import claim
from receipts.ownership import TRIAL_OWNS
from receipts.receiptfile import receipt_path
from receipts.records import (
    AgentTurnRecord,
    DispatchRecord,
    GateRecord,
    HostStateRecord,
    Record,
    SourceRecord,
    ToolCallRecord,
    TrialRecord,
    VerificationRecord,
    VerifierVmRecord,
    VmRecord,
    WorkerRequestRecord,
)
from receipts.records.hostreading import GuestCommandFailure
from receipts.records.trial import (
    CancelSignal,
    Policy,
    Stage,
    Verdict,
)
from receipts.records.vm import VmCategory
from receipts.recordset import RecordSet
from receipts.treedigest import TreeDigestError, tree_sha256
from receipts.verdict import stage_succeeded
from receipts.vocabulary import Backend, Placement, PlacementRequest, channel_for

WORK = "/work"
GATE_DEADLINE_S = 60.0
GUEST_STAGES: frozenset[Stage] = frozenset({"gate", "agent", "verification"})
"""Stages that run commands in the guest: a failure in one may be the guest's full disk."""
RUNTIME_FAILURES: dict[RuntimeFailure, VmCategory] = {
    "fetch_failed": "runtime_fetch_failed",
    "build_failed": "runtime_build_failed",
    "cache_corrupt": "runtime_cache_corrupt",
}
"""How the guest runtime's failure names the VM stage's (runtime.py builds it there)."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrialOptions:
    profile: Profile
    task: str
    script: Path | None
    """A scripted policy's steps; None when the model drives."""
    out_dir: Path
    backend: Backend = "qemu"
    accel: AccelRequest = "auto"
    dispatch: Path | None = None
    suite_member: SuiteMembership | None = None
    """With a suite ticket as `dispatch`: the suite run and member slot this trial is."""
    ledger: Path | None = None
    cache: Path = Path.home() / ".cache" / "harness"
    placement: PlacementRequest | None = None
    """Overrides the profile's `worker.placement` (None keeps the profile's)."""
    locks: Path = PROFILES_DIR
    """Where the operator's pin locks are (hf_snapshot profiles): beside the profiles."""


@dataclass(frozen=True)
class TrialResult:
    verdict: Verdict
    receipt: Path
    bundle: WrittenBundle
    valid: bool
    failed_stage: Stage | None = None
    failed_category: str | None = None
    """The failed stage's closed category as recorded (for the CLI's human output)."""


class StageFailed(Exception):
    """A stage ended the trial; its record (already collected) names the category."""


@dataclass
class Evidence:
    """What the stages have recorded so far. `records` holds each single record under its
    RecordSet field name (a stage's, the verification guest's, memory); what of it the
    receipt may claim is decided once, at bundling (receipts/claim.py)."""

    records: dict[str, Record] = field(default_factory=dict)
    turns: tuple[AgentTurnRecord, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    worker_requests: tuple[WorkerRequestRecord, ...] = ()

    def put(self, name: str, record: Record) -> None:
        self.records[name] = record

    def collected(self) -> RecordSet:
        """Everything recorded so far, as records (no trial record yet)."""
        return RecordSet(
            agent_turns=self.turns,
            worker_requests=self.worker_requests,
            tool_calls=self.tool_calls,
            **self.records,  # type: ignore[arg-type]
        )

    def record_set(
        self, trial: TrialRecord, hoststate: HostStateRecord, cleanup: list[CleanupResult]
    ) -> RecordSet:
        return dataclasses.replace(
            self.collected(),
            trial=trial,
            hoststate=hoststate,
            cleanup=tuple(result.to_record(index) for index, result in enumerate(cleanup)),
        )


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


def _backend_named(name: Backend) -> VmBackend:
    """The VM backend `--backend` names; the trial record states the same name."""
    return LibvirtBackend() if name == "libvirt" else QemuBackend()


class Trial:
    def __init__(
        self,
        options: TrialOptions,
        backend: VmBackend | None = None,
        progress: ProgressSink | None = None,
    ) -> None:
        self.options = options
        self.progress: ProgressSink = progress or NoProgress()
        self.backend = backend or _backend_named(options.backend)
        if self.backend.name != options.backend:
            raise ValueError("the backend object is not the one the options name")
        self.trial_id = secrets.token_hex(16)
        self.tag = self.trial_id[:16]
        self.evidence = Evidence()
        self.owned = OwnedResources()
        self.vm: VmHandle | None = None
        self.vm_category: VmCategory = "ok"
        self.vm_final: VmRecord | None = None
        """The agent guest's record, once read before that guest was released early."""
        self.verifier: VmHandle | None = None
        """The pristine guest the hidden tests run in (verification stage)."""
        self.verifier_started = False
        """Whether the verification guest was attempted: then it has a record, even
        when its cgroup could not be made (no handle)."""
        self.verifier_category: VmCategory = "ok"
        self.task_dir = REPO / "profiles" / "tasks" / options.task
        self.runtime: GuestRuntime | None = None
        """What the agent and the verifier import (and the gate stage verifies)."""
        self.model: PreparedModel | None = None
        self.placement_requested: PlacementRequest = (
            options.placement or options.profile.worker.placement
        )
        # Until the VM stage knows the accelerator, `auto` reads as it resolves without
        # a probe (an explicit kvm request: guest; otherwise host).
        self.worker: Worker | None = (
            None
            if options.script is not None
            else worker_for(
                resolve_placement(
                    self.placement_requested, "kvm" if options.accel == "kvm" else "tcg"
                )
            )
        )
        """Where the worker runs (harness/trial/worker.py); None for a scripted trial."""
        self.current: Stage = "preflight"
        """The stage running now; where an unexpected exception is attributed."""
        self.crashed = False
        """An exception that is not a stage's named failure ended the trial (our defect)."""
        self.cancel_token = CancelToken()
        """Cancelled with the trial: threads doing its blocking work stop (host/cancel.py)."""
        self.stop_signal: CancelSignal | None = None
        """The first stop signal received, whenever it came."""
        self.cancel_signal: CancelSignal | None = None
        """The stop signal that cancelled a stage (None when it came after the last one)."""
        self.cancelled_in: Stage | None = None
        """The stage that signal cancelled; its record and every later one's are void."""
        self.hurry = False
        """A second stop signal (or the grace period running out): release, bundle, exit;
        the host state is not read again (its facets are recorded `unread`)."""
        self._stages_task: asyncio.Future[None] | None = None

    # ---- helpers -------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, name: TrialStep, deadline_s: float | None = None) -> Iterator[None]:
        """Report a step's start and end (and whether it ended well) to the progress sink."""
        self.progress.begin(name, deadline_s)
        ok = False
        try:
            yield
            ok = True
        finally:
            self.progress.end(name, ok)

    def live_vm(self, handle: VmHandle | None = None) -> Vm:
        """The agent's guest, or the guest `handle` holds (the verifier's)."""
        handle = handle if handle is not None else self.vm
        if handle is None or handle.vm is None:
            raise StageFailed
        return handle.vm

    def live_session(self, handle: VmHandle | None = None) -> SshSession:
        vm = self.live_vm(handle)
        if not isinstance(vm, GuestVm):
            raise StageFailed
        return vm.session()

    async def run_in_guest(
        self,
        command: str,
        deadline_s: float,
        stdin: bytes | None = None,
        handle: VmHandle | None = None,
    ) -> CommandResult:
        """Run a command in the agent's guest, or in `handle`'s (stdin carries the gate's
        source when gated)."""
        return await self.live_session(handle).run(command, deadline_s=deadline_s, stdin=stdin)

    async def gated(
        self,
        module: str,
        args: list[str],
        deadline_s: float,
        handle: VmHandle | None = None,
    ) -> GuestCommandFailure | None:
        """Run `module` in the guest through the runtime gate; how it ended as the host reads
        it (guestcmd.command_failure), or None when the gate let it run and it exited 0.

        Why not just the exit status: a stage that raised on a non-zero exit wrote no
        record, so a crashed, killed or refused agent or verifier left a receipt that did
        not audit (record_missing). The host's deadline passing is `deadline_exceeded`
        only while QEMU still runs; if QEMU is gone the SSH error goes on, and the VM's
        record names the failure (`qemu_exited`) as for any lost guest."""
        assert self.runtime is not None
        command = gated_command(self.runtime.pins_sha256, module, *args)
        try:
            result = await self.run_in_guest(command, deadline_s, stdin=GATE_SOURCE, handle=handle)
        except SshError as exc:
            if exc.category != "command_timeout" or await self._vm_gone(handle):
                raise
            return "deadline_exceeded"
        return command_failure(result)

    @property
    def placement(self) -> Placement:
        return self.worker.placement if self.worker is not None else "none"

    @property
    def policy(self) -> Policy:
        if self.options.script is not None:
            return "scripted"
        if self.options.profile.agent.tool_choice == "required":
            return "model_tool_required"
        return "model"

    def cancel(self, signal: CancelSignal) -> None:
        """A stop signal arrived (the CLI's handler calls this on the event loop).

        The first cancels the stage that is running: its task gets CancelledError at
        its current await, and blocking work in threads sees the token within a
        second. Teardown and bundling then run as for a failed stage, so every owned
        resource is released with its receipt and a valid receipt names the stage.
        A signal after the last stage ended cancels nothing (the evidence is complete).
        A second signal means hurry: see `hurry`."""
        if self.stop_signal is not None:
            self.hurry = True
            return
        self.stop_signal = signal
        task = self._stages_task
        if task is not None and task.done():
            return  # the stages are over: teardown and bundling are release and write only
        self.cancel_signal = signal
        self.cancel_token.cancel()
        if task is not None:
            task.cancel()

    def hasten(self) -> None:
        """Hurry as a second signal would: the grace period is running out."""
        self.hurry = True

    # ---- stages --------------------------------------------------------------------------
    def stage_preflight(self) -> None:
        record = preflight(self.options.profile, self.options.cache)
        self.evidence.put("preflight", record)
        if record.category != "ok":
            raise StageFailed

    def stage_source(self) -> SourceRecord:
        record = bind_source(REPO, refuse_dirty=self.options.dispatch is not None)
        self.evidence.put("source", record)
        if record.category != "ok":
            raise StageFailed
        return record

    def stage_dispatch(self, source: SourceRecord) -> None:
        assert self.options.dispatch is not None
        ledger = self.options.ledger or ledger_dir()
        try:
            record: DispatchRecord = admit(
                self.options.dispatch,
                self.options.profile.name,
                self.options.task,
                source,
                ledger,
                member=self.options.suite_member,
            )
        except DispatchRefused:
            raise StageFailed from None  # an unreadable ticket: nothing to record it against
        self.evidence.put("dispatch", record)
        if record.category != "ok":
            raise StageFailed

    def stage_model(self) -> None:
        self.model = prepare(self.options.profile, self.options.cache, locks=self.options.locks)
        self.evidence.put("model", self.model.record)
        if self.model.record.category != "ok":
            raise StageFailed

    async def stage_worker(self, scratch: Path) -> None:
        assert self.model is not None and self.model.gguf is not None and self.worker is not None
        sha256 = self.model.record.gguf_sha256
        assert sha256 is not None
        launch = WorkerLaunch(
            profile=self.options.profile,
            gguf=self.model.gguf,
            sha256=sha256,
            scratch=scratch,
            tag=self.tag,
            owner=self.owned.owner(self.worker.owns),
            session=self.live_session,
            guest_gone=self._vm_gone,
        )
        try:
            await self.worker.start(launch)
        except WorkerStageFailed as failure:
            self.evidence.put("worker", self.worker.failed_record(failure.category, sha256))
            raise StageFailed from None

    async def stop_worker(self) -> None:
        """Stop the worker before verification; its records are final once it has exited."""
        stopped = await self.worker.stop(self.owned) if self.worker is not None else None
        if stopped is not None:
            record, self.evidence.worker_requests = stopped
            self.evidence.put("worker", record)

    def stage_image(self) -> GuestImage:
        started = time.monotonic()
        try:
            image = ensure_image(self.options.cache / "images")
        except ImageError as exc:
            self.evidence.put("image", failure_record(exc, _ms(started)))
            raise StageFailed from None
        self.evidence.put("image", image.to_record())
        return image

    def data_source(self, scratch: Path) -> Path:
        """The read-only disk's tree: runtime, pins, the agent's task copy, the script."""
        assert self.runtime is not None
        root = scratch / "data"
        shutil.copytree(self.runtime.root, root / "runtime", copy_function=link_or_copy)
        shutil.copy(self.runtime.pins, root / "pins.json")
        task_copy = root / "task" / self.options.task
        task_copy.mkdir(parents=True)
        shutil.copy(self.task_dir / "task.toml", task_copy / "task.toml")
        shutil.copytree(self.task_dir / "workspace", root / "workspace")
        if self.options.script is not None:
            shutil.copy(self.options.script, root / "script.json")
        if self.worker is not None:
            self.worker.disk_files(root, self.model.gguf if self.model is not None else None)
        return root

    def build_runtimes(self) -> None:
        """The agent's runtime, and the worker's own when it has one (in the guest: its
        wheels and the guest build of llama.cpp). Raises VmStageFailed with a `runtime_*`
        category (inside the VM stage's plan, so the VM record names it)."""
        cache = self.options.cache
        try:
            self.runtime = build_runtime(
                REPO, cache=cache / "runtimes", wheelsets=cache / "wheelsets"
            )
            if self.worker is not None:
                self.worker.runtime(cache)
        except RuntimeBuildError as exc:
            log.warning("guest runtime unavailable: %s", exc.category)
            raise VmStageFailed(RUNTIME_FAILURES[exc.category]) from None

    async def disk_plan(self, scratch: Path, accelerator: Accelerator) -> DiskPlan:
        """Once the accelerator is known: where the worker runs, the runtimes, and the
        read-only disk's tree. A tree that cannot be written on the host (disk full,
        permissions) is the VM stage's `data_disk_failed`, not QEMU failing to start."""
        if self.worker is not None:
            self.worker = worker_for(resolve_placement(self.placement_requested, accelerator))
        await in_thread(self.build_runtimes)
        try:
            source = await in_thread(self.data_source, scratch)
        except OSError:
            raise VmStageFailed("data_disk_failed") from None
        return DiskPlan(source, self.worker.socket(scratch) if self.worker else None)

    async def stage_vm(self, image: GuestImage, scratch: Path) -> None:
        async def plan(accelerator: Accelerator) -> DiskPlan:
            return await self.disk_plan(scratch, accelerator)

        try:
            self.vm = await start_vm(
                profile=self.options.profile,
                image=image,
                plan=plan,
                tag=self.tag,
                trial_root=self.options.cache / "trials",
                backend=self.backend,
                accel=self.options.accel,
                owned=self.owned,
            )
        except VmStageFailed as failure:
            self.vm_category = failure.category
            self.vm = failure.handle
            raise StageFailed from None

    async def stage_gate(self) -> None:
        assert self.runtime is not None
        started = time.monotonic()
        result = await self.run_in_guest(
            gated_command(self.runtime.pins_sha256, "guest.gate.ready"),
            GATE_DEADLINE_S,
            stdin=GATE_SOURCE,
        )
        line = parse_gate_line(result.stdout)
        category = line.category if line is not None else "unread"
        verified = line.files_verified if line is not None else 0
        self.evidence.put(
            "gate",
            GateRecord(
                category=category,
                pin_table_sha256=self.runtime.pins_sha256,
                files_verified=verified,
                duration_ms=_ms(started),
            ),
        )
        if category != "ok" or result.exit_status != 0:
            raise StageFailed

    async def stage_agent(self) -> None:
        assert self.runtime is not None
        profile = self.options.profile
        prepare = (
            f"mkdir -m 0755 -p {WORK} && cp -a {READ_ONLY}/workspace {WORK}/workspace && "
            f"mkdir -p {WORK}/task && cp -a {READ_ONLY}/task/{self.options.task} {WORK}/task/"
        )
        result = await self.run_in_guest(prepare, 60.0)
        if result.exit_status != 0:
            raise StageFailed
        limits = {
            "max_turns": profile.agent.max_turns,
            "max_tool_calls": profile.agent.max_tool_calls,
            "max_invalid_outputs": profile.agent.max_invalid_outputs,
            "max_total_tokens": profile.agent.max_total_tokens,
            "wall_deadline_s": profile.agent.wall_deadline_s,
        }
        args = [
            "--task-dir",
            f"{WORK}/task/{self.options.task}",
            "--workspace",
            f"{WORK}/workspace",
            "--records",
            f"{WORK}/agent.json",
            "--limits",
            json.dumps(limits),
            "--approvals",
            profile.agent.approvals,
        ]
        if self.options.script is not None:
            args += ["--script", f"{READ_ONLY}/script.json"]
        else:
            assert self.model is not None and self.model.record.gguf_sha256 is not None
            assert self.worker is not None
            inference = profile.inference
            args += [
                "--endpoint",
                self.worker.url,
                "--model",
                f"gguf-{self.model.record.gguf_sha256[:12]}",
                "--max-tokens",
                str(inference.max_tokens),
                "--tool-choice",
                profile.agent.tool_choice,
                "--temperature",
                "0",
                "--seed",
                "0",
                "--request-timeout-s",
                str(inference.request_deadline_s),
            ]
        deadline = float(profile.agent.wall_deadline_s) + 60.0
        failure = await self.gated("guest.agent", args, deadline)
        if failure is not None:
            self.evidence.put("agent", unread_agent_record(self.policy, failure))
            raise StageFailed
        try:
            output = read_agent_output(await self.fetch_output(f"{WORK}/agent.json"))
        except GuestOutputInvalid:
            self.evidence.put("agent", unread_agent_record(self.policy))
            raise StageFailed from None
        self.evidence.put("agent", output.agent)
        self.evidence.turns, self.evidence.tool_calls = output.turns, output.tool_calls
        if not stage_succeeded(output.agent):
            raise StageFailed

    async def fetch_output(self, remote: str, handle: VmHandle | None = None) -> bytes:
        """A record file the guest wrote. One over the transfer limit is the guest's output
        refused (`too_large`), not a lost connection."""
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "output.json"
            try:
                await self.live_vm(handle).get(remote, local, 60.0)
            except SshError as exc:
                if exc.category != "transfer_too_large":
                    raise
                raise GuestOutputInvalid("too_large") from None
            return local.read_bytes()

    async def stage_verification(self, image: GuestImage, scratch: Path) -> None:
        """The hidden tests, in a guest the agent never touched.

        The agent's guest is untrusted once the model's code ran there (a planted
        `sitecustomize`, a process that outlived its tool call, a rewritten interpreter):
        only its final workspace leaves it, as an archive the host unpacks into regular
        files (carry.py). That guest is then released, and a second guest boots from the
        same pristine content-keyed image in a new overlay, with the carried workspace
        and the whole task (hidden tests included, from the host) on its read-only disk.
        The verifier runs there through the runtime gate, and its record is judged here."""
        assert self.runtime is not None and self.vm is not None
        carried = await self.carry_workspace(scratch)
        accelerator = await self.release_agent_guest()
        if carried is None:
            self.evidence.put("verification", unread_verification_record("workspace_not_carried"))
            raise StageFailed
        try:
            carried_sha256 = await in_thread(tree_sha256, carried)
        except TreeDigestError:
            self.evidence.put("verification", unread_verification_record("workspace_not_carried"))
            raise StageFailed from None
        source = await in_thread(self.verifier_source, scratch, carried)
        self.verifier_started = True
        try:
            self.verifier = await start_verifier_vm(
                profile=self.options.profile,
                image=image,
                data_source=source,
                tag=self.tag,
                trial_root=self.options.cache / "trials",
                backend=self.backend,
                accelerator=accelerator,
                owned=self.owned,
            )
        except VmStageFailed as failure:
            self.verifier, self.verifier_category = failure.handle, failure.category
            self.evidence.put("verification", unread_verification_record("verifier_vm_failed"))
            raise StageFailed from None
        try:
            await self.judge_verification(self.verifier, carried_sha256)
        except (SshError, VmError):
            lost = await self._vm_gone(self.verifier)
            self.verifier_category = "qemu_exited" if lost else "ssh_dropped"
            self.evidence.put("verification", unread_verification_record("verifier_vm_failed"))
            raise StageFailed from None

    async def judge_verification(self, handle: VmHandle | None, carried_sha256: str) -> None:
        """Run the verifier in `handle`'s guest and keep its record, cross-checked here
        against the task the host shipped and the workspace it carried (`carried_sha256`,
        receipts.treedigest of the carried tree): a verdict about other tests or other
        bytes than those is no verdict about this trial."""
        record = await self.run_verifier(handle)
        read = record.task_sha256 is not None  # None only in the host's stand-in
        if read and record.task_sha256 != task_digest(self.task_dir):  # other tests than ours
            record = record.model_copy(update={"category": "runner_error", "result": "failed"})
        elif record.workspace_sha256 is not None and record.workspace_sha256 != carried_sha256:
            record = record.model_copy(
                update={"category": "workspace_mismatch", "result": "failed"}
            )
        self.evidence.put("verification", record)
        if record.category != "ok":
            raise StageFailed

    async def carry_workspace(self, scratch: Path) -> Path | None:
        """The agent guest's final workspace as a host directory of regular files, or None
        when what that guest sent is not one (too large, malformed, unsafe names)."""
        archive = f"{WORK}/final-workspace.tar"
        packed = await self.run_in_guest(tar_command(f"{WORK}/workspace", archive), 120.0)
        if packed.exit_status != 0:
            return None
        local = scratch / "final-workspace.tar"
        try:
            await self.live_vm().get(archive, local, 120.0)
        except SshError as exc:
            if exc.category != "transfer_too_large":
                raise
            return None
        dest = scratch / "final-workspace"
        try:
            await in_thread(unpack_workspace, local, dest)
        except CarryRefused:
            return None
        finally:
            local.unlink(missing_ok=True)
        return dest

    async def release_agent_guest(self) -> tuple[Accelerator, AcceleratorReason]:
        """Read the agent guest's VM record, then release that guest before the
        verification guest boots: nothing of it is needed any more, and a 12 GiB guest
        need not sit beside the next. Returns the accelerator the trial chose, which the
        verification guest reuses."""
        assert self.vm is not None and self.vm.vm is not None
        facts = self.vm.vm.facts()
        self.vm_final = vm_record(
            self.vm, self.vm_category, self.options.profile, backend=self.options.backend
        )
        await self.owned.release_early("qemu_process")
        return facts.accelerator, facts.accelerator_reason

    def verifier_source(self, scratch: Path, workspace: Path) -> Path:
        """The verification guest's read-only disk: the runtime and its pins, the whole
        task from the host (hidden tests included), and the carried workspace."""
        assert self.runtime is not None
        root = scratch / "verifier-data"
        shutil.copytree(self.runtime.root, root / "runtime", copy_function=link_or_copy)
        shutil.copy(self.runtime.pins, root / "pins.json")
        shutil.copytree(
            self.task_dir,
            root / "task" / self.options.task,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        shutil.copytree(workspace, root / "workspace")
        return root

    async def run_verifier(self, handle: VmHandle | None) -> VerificationRecord:
        """guest.verify in `handle`'s guest; its record, or the host's stand-in."""
        task = load_task(self.task_dir)
        args = [
            "--task-dir",
            f"{READ_ONLY}/task/{self.options.task}",
            "--workspace",
            f"{READ_ONLY}/workspace",
            "--scratch",
            f"{WORK}/verify",
            "--records",
            f"{WORK}/verification.json",
        ]
        deadline = float(task.hidden.deadline_s) + 60.0
        failure = await self.gated("guest.verify", args, deadline, handle=handle)
        if failure is not None:
            return unread_verification_record(failure)
        try:
            data = await self.fetch_output(f"{WORK}/verification.json", handle=handle)
            return read_verification(data)
        except GuestOutputInvalid:
            return unread_verification_record()

    async def _vm_gone(self, handle: VmHandle | None = None) -> bool:
        """Whether the guest's QEMU process (the agent's, or `handle`'s) has exited (vs.
        only the SSH link failing). It waits up to 2 s for the exit to show without
        holding the event loop: a stop signal or the memory sampler must not wait on it."""
        handle = handle if handle is not None else self.vm
        vm = handle.vm if handle is not None else None
        if not isinstance(vm, GuestVm):
            return False
        settle = time.monotonic() + 2.0  # the SSH error can arrive before the exit is visible
        while vm.alive() and time.monotonic() < settle:
            await asyncio.sleep(0.05)
        return not vm.alive()

    async def _name_guest_disk_full(self) -> bool:
        """After a guest stage failed: if the guest's disk is full, that names the failure
        (`guest_disk_full`, a VM category). Only a probe that read `full` decides."""
        vm = self.vm.vm if self.vm is not None else None
        if self.current not in GUEST_STAGES or not isinstance(vm, GuestVm) or not vm.alive():
            return False
        try:
            state = await probe_disk(self.run_in_guest)
        except StageFailed:
            return False
        if state != "full":
            return False
        self.vm_category = "guest_disk_full"
        return True

    # ---- the whole run --------------------------------------------------------------------
    def stage_step(
        self, stage: Stage, deadline_s: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Enter `stage`: where an unexpected exception is attributed, and a progress step."""
        self.current = stage
        return self.step(stage, deadline_s)

    async def stages(self, scratch: Path) -> None:
        """Every stage in order; the first failure raises (StageFailed, SshError, VmError)."""
        profile = self.options.profile
        with self.stage_step("preflight"):
            self.stage_preflight()
        with self.stage_step("source"):
            source = self.stage_source()
        if self.options.dispatch is not None:
            with self.stage_step("dispatch"):
                self.stage_dispatch(source)
        if self.options.script is None:
            with self.stage_step("model", float(profile.provisioning.deadline_s)):
                await in_thread(self.stage_model)  # hashing, conversion: minutes for a real model
        with self.stage_step("image", float(profile.provisioning.deadline_s)):
            image = await in_thread(self.stage_image)
        with self.stage_step("vm", float(profile.vm.ssh_deadline_s)):
            await self.stage_vm(image, scratch)
        with self.stage_step("gate", GATE_DEADLINE_S):
            await self.stage_gate()
        if self.worker is not None:
            with self.stage_step("worker", self.worker.ready_deadline_s):
                await self.stage_worker(scratch)
        try:
            with self.stage_step("agent", float(profile.agent.wall_deadline_s)):
                await self.stage_agent()
        finally:
            await self.stop_worker()  # before verification, and whatever the agent did
        with self.stage_step("verification"):
            await self.stage_verification(image, scratch)

    async def run(self) -> TrialResult:
        """The trial under its lease (host/vm/lease.py): `harness gc` leaves a live
        trial's resources alone and releases a killed one's."""
        trials_root = self.options.cache / "trials"
        with TrialLease(trials_root, self.tag), cancel_scope(self.cancel_token):
            return await self._run(trials_root)

    async def _run(self, trials_root: Path) -> TrialResult:
        started_ms = int(time.time() * 1000)
        before = self.host_snapshot(trials_root)
        scratch = Path(tempfile.mkdtemp(prefix=f"harness-trial-{self.tag}-", dir=trials_root))
        self.owned.owner(TRIAL_OWNS).register("trial_scratch", _scratch_release(scratch))
        sampler = MemorySampler(
            lambda: next((h.memory_dir for h in (self.verifier, self.vm) if h), None),
            lambda: memory_dir_of_pid(self.worker.memory_pid() if self.worker else None),
        )
        sampler.start()
        try:
            try:
                await self.cancellable_stages(scratch)
            except StageFailed:
                await self._name_guest_disk_full()
            except (SshError, VmError):
                if await self._vm_gone():
                    self.vm_category = "qemu_exited"
                elif not await self._name_guest_disk_full():
                    self.vm_category = "ssh_dropped"
            except Exception:  # noqa: BLE001 - our defect: still named, torn down and recorded
                if not await self._name_guest_disk_full():
                    self.crashed = True
        finally:
            memory = sampler.stop()  # before teardown releases the cgroups it reads
            with self.step("teardown"):
                vm_final = self.vm_final or (
                    vm_record(
                        self.vm,
                        self.vm_category,
                        self.options.profile,
                        backend=self.options.backend,
                    )
                    if self.vm is not None
                    else None
                )
                verifier_final = (
                    VerifierVmRecord.of(
                        vm_record(
                            self.verifier,
                            self.verifier_category,
                            self.options.profile,
                            backend=self.options.backend,
                            guest_memory_bytes=verifier_memory_bytes(self.options.profile),
                        )
                    )
                    if self.verifier_started
                    else None
                )
                cleanup = await self.owned.release_all()
        if vm_final is not None:
            self.evidence.put("vm", vm_final)
        if verifier_final is not None:
            self.evidence.put("verifier_vm", verifier_final)
        self.evidence.put("memory", memory)
        with self.step("bundle"):
            hoststate = host_state_record(before, await self.after_snapshot(trials_root))
            return self.bundle(started_ms, cleanup, hoststate)

    async def after_snapshot(self, trials_root: Path) -> HostSnapshot:
        """The host state after teardown, read in a thread so that a second stop signal
        (hurry) is seen while it is read: the firewall tools alone may take 10 s. In a
        hurry nothing more is waited for; the snapshot says it read nothing (`unread`,
        never `unchanged`), and the reading thread ends on its own (bounded by its tools'
        deadlines)."""
        if self.hurry:
            return unread_snapshot()
        reading = asyncio.ensure_future(asyncio.to_thread(self.host_snapshot, trials_root))
        reading.add_done_callback(lambda task: task.cancelled() or task.exception())
        while True:
            done, _ = await asyncio.wait({reading}, timeout=0.1)
            if self.hurry:  # a signal pending when the reading began is handled in the wait
                return unread_snapshot()
            if done:
                return reading.result()

    async def cancellable_stages(self, scratch: Path) -> None:
        """The stages as a task `cancel` can cancel. When a stop signal ended them,
        whatever the cancel made the running stage raise (CancelledError at an await,
        `Cancelled` from a thread, or an error of a connection cut short), the cancel is
        what ended the trial: the stage running then is recorded as cancelled."""
        self._stages_task = asyncio.ensure_future(self.stages(scratch))
        if self.cancel_signal is not None:  # the signal came before the first stage began
            self._stages_task.cancel()
        try:
            await self._stages_task
        except (asyncio.CancelledError, Cancelled, Exception):
            if self.cancel_signal is None:
                raise  # not a stop signal's doing
            self.cancelled_in = self.current

    def host_snapshot(self, trials_root: Path) -> HostSnapshot:
        """Host state, leaving out what provably belongs to other trials alive now (their
        leases held): two trials side by side must not fail each other. The tags are
        listed just before reading, and a trial leases its tag before it acquires
        anything; this trial's own tag is never left out (host/hoststate/others.py).
        Cgroups and listening sockets of no trial (other programs on a shared host) are
        left out and counted; this process and its descendants, and whatever sits in
        this trial's cgroups, are this trial's (host/hoststate/attribution.py)."""
        return take_snapshot(
            exclude_tags=live_trial_tags(trials_root, self.tag),
            own=OwnTrial(self.tag, os.getpid()),
        )

    def bundle(
        self, started_ms: int, cleanup: list[CleanupResult], hoststate: HostStateRecord
    ) -> TrialResult:
        """Write the receipt: what the trial may claim of what it collected (receipts/
        claim.py, the rule the audit checks), audited before it is reported."""
        collected = self.evidence.record_set(self.trial_record(started_ms), hoststate, cleanup)
        records = claim(collected, crashed_in=self.current if self.crashed else None)
        trial = records.trial
        assert isinstance(trial, TrialRecord)
        self.options.out_dir.mkdir(parents=True, exist_ok=True)
        target = receipt_path(self.options.out_dir, self.trial_id)
        written = write_bundle(records, target)
        valid = audit_bytes(target.read_bytes()).valid
        failed = trial.failed_stage
        failed_record = records.stage_record(failed) if failed is not None else None
        return TrialResult(
            verdict=trial.verdict,
            receipt=target,
            bundle=written,
            valid=valid,
            failed_stage=failed,
            failed_category=getattr(failed_record, "category", None),
        )

    def trial_record(self, started_ms: int) -> TrialRecord:
        """What was asked for and how it ended; the failed stage, internal error and
        verdict are for receipts/claim.py to fill in."""
        return TrialRecord(
            trial_id=self.trial_id,
            harness_version=HARNESS_VERSION,
            profile=self.options.profile.name,
            task=self.options.task,
            policy=self.policy,
            backend=self.options.backend,
            accel_requested=self.options.accel,
            placement=self.placement,
            channel=channel_for(self.placement),
            dispatched=self.options.dispatch is not None,
            started_unix_ms=started_ms,
            ended_unix_ms=max(int(time.time() * 1000), started_ms),
            failed_stage=None,
            internal_error_stage=None,
            cancelled_stage=self.cancelled_in,
            cancel_signal=self.cancel_signal if self.cancelled_in is not None else None,
            verdict="evidence_incomplete",
        )


def _scratch_release(scratch: Path) -> Release:
    """The trial's scratch goes last (registered first): everything in it is released."""

    async def release() -> tuple[CleanupResult, ...]:
        return (await asyncio.to_thread(remove_dir, scratch, "trial_scratch"),)

    return release


async def run_trial(options: TrialOptions, progress: ProgressSink | None = None) -> TrialResult:
    return await Trial(options, progress=progress).run()
