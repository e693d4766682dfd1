"""The verification stage: the hidden tests, in a guest the agent never touched.

The agent's guest is untrusted once the model's code ran there (a planted
`sitecustomize`, a process that outlived its tool call, a rewritten interpreter): only
its final workspace leaves it, as an archive the host unpacks into regular files
(carry.py). That guest is then released. A second guest, started from the same
pristine content-keyed image in a new overlay with the whole task (hidden tests
included, from the host) on its read-only disk, runs the verifier through the runtime
gate: begun while the agent worked when memory allows, or now (verifierprep.py). It
receives the carried workspace, and its record is judged here, on the host.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Self

from guest.task import load_task, task_digest
from harness.trial.carry import CarryRefused, tar_command, unpack_workspace
from harness.trial.context import TrialContext
from harness.trial.evidence import Evidence, StageFailed
from harness.trial.guestcmd import READ_ONLY
from harness.trial.guestrecords import (
    GuestOutputInvalid,
    read_verification,
    unread_verification_record,
)
from harness.trial.guestrun import WORK
from harness.trial.guests import Guest, Guests
from harness.trial.stage import TrialState
from harness.trial.verifierprep import NotDelivered, VerifierPreparation
from harness.trial.vmstage import VmStageFailed, vm_record
from host.cancel import in_thread
from host.runtime import GuestRuntime
from host.ssh.errors import SshError
from host.vm.categories import Accelerator, AcceleratorReason
from host.vm.errors import VmError
from receipts.records import VerificationRecord
from receipts.records.hostreading import GuestCommandFailure, VerifierHostReading
from receipts.treedigest import TreeDigestError, tree_sha256


class Verification:
    """One run of the stage: carry, release the agent's guest, hand the workspace to the
    verifier waiting in the pristine guest (verifierprep.py), judge."""

    def __init__(
        self,
        *,
        context: TrialContext,
        scratch: Path,
        runtime: GuestRuntime | None,
        guests: Guests,
        preparation: VerifierPreparation,
        evidence: Evidence,
    ) -> None:
        assert runtime is not None
        self.context = context
        self.scratch = scratch
        self.runtime = runtime
        self.guests = guests
        self.preparation = preparation
        self.evidence = evidence

    @classmethod
    def of(cls, state: TrialState) -> Self:
        """The stage over the trial's state: what of it verification may touch."""
        return cls(
            context=state.context,
            scratch=state.scratch,
            runtime=state.prepared.runtime,
            guests=state.guests,
            preparation=state.verifier,
            evidence=state.evidence,
        )

    def _unread(self, reading: VerifierHostReading) -> None:
        self.evidence.put("verification", unread_verification_record(reading))

    async def run(self) -> None:
        assert self.guests.agent.handle is not None
        carried = await self.carry_workspace()
        accelerator = await self.release_agent_guest()
        if carried is None:
            self._unread("workspace_not_carried")
            raise StageFailed
        try:
            carried_sha256 = await in_thread(tree_sha256, carried)
        except TreeDigestError:
            self._unread("workspace_not_carried")
            raise StageFailed from None
        preparation, verifier = self.preparation, self.guests.verifier
        if not preparation.begun():
            preparation.begin(accelerator, "after_agent")
        try:
            running = await preparation.ready()
            preparation.take_full_cpu_share()
            await preparation.send(carried)
            await judge(
                self.context, self.runtime, verifier, carried_sha256, self.evidence, running=running
            )
        except VmStageFailed as failure:
            verifier.category = failure.category
            self._unread("verifier_vm_failed")
            raise StageFailed from None
        except NotDelivered:
            self._unread("workspace_not_carried")
            raise StageFailed from None
        except (SshError, VmError):
            verifier.category = "qemu_exited" if await verifier.gone() else "ssh_dropped"
            self._unread("verifier_vm_failed")
            raise StageFailed from None

    async def carry_workspace(self) -> Path | None:
        """The agent guest's final workspace as a host directory of regular files, or None
        when what that guest sent is not one (too large, malformed, unsafe names)."""
        agent = self.guests.agent
        archive = f"{WORK}/final-workspace.tar"
        packed = await agent.run(tar_command(f"{WORK}/workspace", archive), 120.0)
        if packed.exit_status != 0:
            return None
        local = self.scratch / "final-workspace.tar"
        try:
            await agent.vm().get(archive, local, 120.0)
        except SshError as exc:
            if exc.category != "transfer_too_large":
                raise
            return None
        dest = self.scratch / "final-workspace"
        try:
            await in_thread(unpack_workspace, local, dest)
        except CarryRefused:
            return None
        finally:
            local.unlink(missing_ok=True)
        return dest

    async def release_agent_guest(self) -> tuple[Accelerator, AcceleratorReason]:
        """Read the agent guest's VM record, then release that guest: nothing of it is
        needed any more, and a 12 GiB guest need not sit beside the next. Returns the
        accelerator the trial chose, which the verification guest reuses."""
        agent = self.guests.agent
        assert agent.handle is not None and agent.handle.vm is not None
        facts = agent.handle.vm.facts()
        self.guests.agent_final = vm_record(
            agent.handle,
            agent.category,
            self.context.profile,
            backend=self.context.options.backend,
        )
        await agent.handle.owner.release_early("qemu_process")  # not the verifier's
        return facts.accelerator, facts.accelerator_reason


async def judge(
    context: TrialContext,
    runtime: GuestRuntime,
    guest: Guest,
    carried_sha256: str,
    evidence: Evidence,
    *,
    running: Awaitable[GuestCommandFailure | None] | None = None,
) -> None:
    """Run the verifier in `guest` and keep its record, cross-checked here against the
    task the host shipped and the workspace it carried (`carried_sha256`,
    receipts.treedigest of the carried tree): a verdict about other tests or other bytes
    than those is no verdict about this trial. `running` is the verifier already started
    (verifierprep.py); without it, it is run here."""
    record = await run_verifier(context, runtime, guest, running)
    read = record.task_sha256 is not None  # None only in the host's stand-in
    if read and record.task_sha256 != task_digest(context.task_dir):  # other tests than ours
        record = record.model_copy(update={"category": "runner_error", "result": "failed"})
    elif record.workspace_sha256 is not None and record.workspace_sha256 != carried_sha256:
        record = record.model_copy(update={"category": "workspace_mismatch", "result": "failed"})
    evidence.put("verification", record)
    if record.category != "ok":
        raise StageFailed


async def run_verifier(
    context: TrialContext,
    runtime: GuestRuntime,
    guest: Guest,
    running: Awaitable[GuestCommandFailure | None] | None = None,
) -> VerificationRecord:
    """guest.verify in `guest` (or its run already under way); its record, or the host's
    stand-in."""
    if running is not None:
        return await _record_of(guest, await running)
    task = load_task(context.task_dir)
    args = [
        "--task-dir",
        f"{READ_ONLY}/task/{context.options.task}",
        "--workspace",
        f"{READ_ONLY}/workspace",
        "--scratch",
        f"{WORK}/verify",
        "--records",
        f"{WORK}/verification.json",
    ]
    deadline = float(task.hidden.deadline_s) + 60.0
    return await _record_of(
        guest, await guest.gated(runtime.pins_sha256, "guest.verify", args, deadline)
    )


async def _record_of(guest: Guest, failure: GuestCommandFailure | None) -> VerificationRecord:
    if failure is not None:
        return unread_verification_record(failure)
    try:
        return read_verification(await guest.fetch(f"{WORK}/verification.json"))
    except GuestOutputInvalid:
        return unread_verification_record()
