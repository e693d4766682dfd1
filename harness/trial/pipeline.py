"""`harness trial`: one trial end to end, one receipt ZIP, one verdict.

The trial runs its table of stages (stages.py) in order, each leaving a closed record;
the first failure ends the run with its category, and teardown and bundling still run.
Owned resources are released in reverse order with one cleanup receipt each, the host
state is compared, the verdict is derived from the records by the same code the audit
uses, and the bundle is audited before it is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.trial.context import Prepared, TrialContext, TrialOptions
from harness.trial.evidence import Evidence, StageFailed
from harness.trial.guests import Guests
from harness.trial.hoststate import host_state_record, unread_snapshot
from harness.trial.memsampler import MemorySampler, memory_dir_of_pid
from harness.trial.owned import OwnedResources, Release
from harness.trial.placement import resolve_placement, worker_for
from harness.trial.progress import NoProgress, ProgressSink, TrialStep
from harness.trial.stage import StageSpec, TrialState
from harness.trial.stages import STAGES
from harness.trial.stopping import StopSignals
from harness.trial.verifierprep import VerifierPreparation
from harness.version import HARNESS_VERSION
from host.cancel import CancelToken, cancel_scope
from host.hoststate.attribution import OwnTrial
from host.hoststate.others import live_trial_tags
from host.hoststate.snapshot import HostSnapshot, take_snapshot
from host.release import CleanupResult, remove_dir
from host.ssh.errors import SshError
from host.vm.backend import VmBackend
from host.vm.errors import VmError
from host.vm.lease import TrialLease
from host.vm.libvirt_backend import LibvirtBackend
from host.vm.qemu import QemuBackend
from receipts.audit import audit_bytes
from receipts.bundle import WrittenBundle, write_bundle
from receipts.claim import claim
from receipts.ownership import TRIAL_OWNS
from receipts.receiptfile import receipt_path
from receipts.records import HostStateRecord, TrialRecord
from receipts.records.trial import STAGE_ORDER, CancelSignal, Policy, Stage, Verdict
from receipts.verdict import trial_stages
from receipts.vocabulary import Backend, Placement, channel_for

GUEST_STAGES: frozenset[Stage] = frozenset({"gate", "agent", "verification"})
"""Stages that run commands in the guest: a failure in one may be the guest's full disk."""


@dataclass(frozen=True)
class TrialResult:
    verdict: Verdict
    receipt: Path
    bundle: WrittenBundle
    valid: bool
    failed_stage: Stage | None = None
    failed_category: str | None = None
    """The failed stage's closed category as recorded (for the CLI's human output)."""


def _backend_named(name: Backend) -> VmBackend:
    """The VM backend `--backend` names; the trial record states the same name."""
    return LibvirtBackend() if name == "libvirt" else QemuBackend()


class Trial:
    """Runs the stage table over one state, then teardown and the receipt, however the
    stages ended. `stages` is the table (a test may run one with a stage wrapped); it
    holds every stage, in `STAGE_ORDER`, so the records' order is the order they ran in
    and no stage a trial needs can be missing from it."""

    def __init__(
        self,
        options: TrialOptions,
        backend: VmBackend | None = None,
        progress: ProgressSink | None = None,
        stages: tuple[StageSpec, ...] = STAGES,
    ) -> None:
        backend = backend or _backend_named(options.backend)
        if backend.name != options.backend:
            raise ValueError("the backend object is not the one the options name")
        if tuple(stage.name for stage in stages) != STAGE_ORDER:
            raise ValueError("the stage table holds every stage once, in the records' order")
        trial_id = secrets.token_hex(16)
        self.context = TrialContext(options, trial_id, trial_id[:16], backend)
        self.progress: ProgressSink = progress or NoProgress()
        self.table = stages
        self.evidence = Evidence()
        self.owned = OwnedResources()
        self.guests = Guests()
        # Until the VM stage knows the accelerator, `auto` reads as it resolves without
        # a probe (an explicit kvm request: guest; otherwise host).
        self.prepared = Prepared(
            worker=None
            if options.script is not None
            else worker_for(
                resolve_placement(
                    self.context.placement_requested, "kvm" if options.accel == "kvm" else "tcg"
                )
            )
        )
        self.current: Stage = "preflight"
        """The stage running now; where an unexpected exception is attributed."""
        self.crashed = False
        """An exception that is not a stage's named failure ended the trial (our defect)."""
        self.stopping = StopSignals()

    @property
    def options(self) -> TrialOptions:
        return self.context.options

    @property
    def policy(self) -> Policy:
        return self.context.policy

    @property
    def placement(self) -> Placement:
        worker = self.prepared.worker
        return worker.placement if worker is not None else "none"

    @property
    def stop_signal(self) -> CancelSignal | None:
        """The first stop signal received, whenever it came (the CLI's exit status)."""
        return self.stopping.first

    @property
    def cancel_token(self) -> CancelToken:
        return self.stopping.token

    def cancel(self, signal: CancelSignal) -> None:
        """A stop signal arrived (the CLI's handler calls this on the event loop)."""
        self.stopping.receive(signal)

    def hasten(self) -> None:
        """Hurry as a second signal would: the grace period is running out."""
        self.stopping.hurry = True

    # ---- the stages --------------------------------------------------------------------
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

    def stage_step(
        self, stage: Stage, deadline_s: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Enter `stage`: where an unexpected exception is attributed, and a progress step."""
        self.current = stage
        return self.step(stage, deadline_s)

    async def stages(self, state: TrialState) -> None:
        """The stages this trial runs, in order; the first failure raises (StageFailed,
        SshError, VmError)."""
        runs = trial_stages(dispatched=self.context.dispatched, policy=self.policy)
        for stage in self.table:
            if stage.name not in runs:
                continue
            if self.stopping.cancelling is not None:
                # A stop signal came, yet the stage it cancelled returned: something under
                # it lost the cancel (Python 3.11's wait_for can drop one that lands as its
                # inner future completes). The trial stops here all the same, recorded as
                # cancelled in that stage, instead of running on with its token cancelled.
                raise asyncio.CancelledError
            try:
                with self.stage_step(stage.name, stage.deadline_s(state)):
                    await stage.run(state)
            finally:
                if stage.after is not None:
                    await stage.after(state)

    def state(self, scratch: Path) -> TrialState:
        """What the stages share, over the trial's scratch directory."""
        preparation = VerifierPreparation(
            context=self.context,
            scratch=scratch,
            owned=self.owned,
            prepared=self.prepared,
            guests=self.guests,
        )
        return TrialState(
            self.context,
            scratch,
            self.owned,
            self.prepared,
            self.guests,
            self.evidence,
            preparation,
        )

    async def _name_guest_disk_full(self) -> bool:
        """After a guest stage failed: the agent guest's full disk names the failure."""
        return self.current in GUEST_STAGES and await self.guests.agent.disk_full()

    async def _run_stages(self, state: TrialState) -> None:
        """The stages, and the name of what ended them: a stage's record, the agent
        guest's VM category, or a defect of ours (`crashed`)."""
        agent = self.guests.agent
        try:
            await self.stopping.run(self.stages(state), lambda: self.current)
        except StageFailed:
            await self._name_guest_disk_full()
        except (SshError, VmError):
            if await agent.gone():
                agent.category = "qemu_exited"
            elif not await self._name_guest_disk_full():
                agent.category = "ssh_dropped"
        except Exception:  # noqa: BLE001 - our defect: still named, torn down and recorded
            if not await self._name_guest_disk_full():
                self.crashed = True

    # ---- the whole run -----------------------------------------------------------------
    async def run(self) -> TrialResult:
        """The trial under its lease (host/vm/lease.py): `harness gc` leaves a live
        trial's resources alone and releases a killed one's."""
        trials_root = self.context.trials_root
        with TrialLease(trials_root, self.context.tag), cancel_scope(self.cancel_token):
            return await self._run(trials_root)

    async def _run(self, trials_root: Path) -> TrialResult:
        started_ms = int(time.time() * 1000)
        before = self.host_snapshot(trials_root)
        scratch = Path(
            tempfile.mkdtemp(prefix=f"harness-trial-{self.context.tag}-", dir=trials_root)
        )
        self.owned.owner(TRIAL_OWNS).register("trial_scratch", _scratch_release(scratch))
        state = self.state(scratch)
        sampler = MemorySampler(
            self.guests.memory_dir,
            lambda: memory_dir_of_pid(
                self.prepared.worker.memory_pid() if self.prepared.worker else None
            ),
        )
        sampler.start()
        profile, backend = self.options.profile, self.options.backend
        try:
            await self._run_stages(state)
        finally:
            await state.verifier.abandon()  # a verifier still waiting waits no more
            memory = sampler.stop()  # before teardown releases the cgroups it reads
            with self.step("teardown"):
                # Read while the guests' cgroups exist (peak memory, OOM kills), completed
                # once their QEMUs were stopped (how each ended: Guest.ended).
                vm_final = self.guests.agent_record(profile, backend)
                verifier_final = self.guests.verifier_record(profile, backend, state.verifier.when)
                cleanup = await self.owned.release_all()
        if vm_final is not None:
            self.evidence.put("vm", self.guests.agent.ended(vm_final))
        if verifier_final is not None:
            self.evidence.put("verifier_vm", self.guests.verifier.ended(verifier_final))
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
        if self.stopping.hurry:
            return unread_snapshot()
        reading = asyncio.ensure_future(asyncio.to_thread(self.host_snapshot, trials_root))
        reading.add_done_callback(lambda task: task.cancelled() or task.exception())
        while True:
            done, _ = await asyncio.wait({reading}, timeout=0.1)
            if self.stopping.hurry:  # a signal pending when the reading began is handled
                return unread_snapshot()
            if done:
                return reading.result()

    def host_snapshot(self, trials_root: Path) -> HostSnapshot:
        """Host state, leaving out what provably belongs to other trials alive now (their
        leases held): two trials side by side must not fail each other. The tags are
        listed just before reading, and a trial leases its tag before it acquires
        anything; this trial's own tag is never left out (host/hoststate/others.py).
        Cgroups and listening sockets of no trial (other programs on a shared host) are
        left out and counted; this process and its descendants, and whatever sits in
        this trial's cgroups, are this trial's (host/hoststate/attribution.py)."""
        tag = self.context.tag
        return take_snapshot(
            exclude_tags=live_trial_tags(trials_root, tag), own=OwnTrial(tag, os.getpid())
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
        target = receipt_path(self.options.out_dir, self.context.trial_id)
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
        options, stopping = self.options, self.stopping
        return TrialRecord(
            trial_id=self.context.trial_id,
            harness_version=HARNESS_VERSION,
            profile=options.profile.name,
            task=options.task,
            policy=self.policy,
            backend=options.backend,
            accel_requested=options.accel,
            placement=self.placement,
            channel=channel_for(self.placement),
            dispatched=self.context.dispatched,
            started_unix_ms=started_ms,
            ended_unix_ms=max(int(time.time() * 1000), started_ms),
            failed_stage=None,
            internal_error_stage=None,
            cancelled_stage=stopping.cancelled_in,
            cancel_signal=stopping.cancelling if stopping.cancelled_in is not None else None,
            verdict="evidence_incomplete",
        )


def _scratch_release(scratch: Path) -> Release:
    """The trial's scratch goes last (registered first): everything in it is released."""

    async def release() -> tuple[CleanupResult, ...]:
        return (await asyncio.to_thread(remove_dir, scratch, "trial_scratch"),)

    return release


async def run_trial(options: TrialOptions, progress: ProgressSink | None = None) -> TrialResult:
    return await Trial(options, progress=progress).run()
