"""The verification stage: the hidden tests, in a guest the agent never touched.

The agent's guest is untrusted once the model's code ran there (a planted
`sitecustomize`, a process that outlived its tool call, a rewritten interpreter): only
its final workspace leaves it, as an archive the host unpacks into regular files
(carry.py). That guest is then released, and a second guest boots from the same
pristine content-keyed image in a new overlay, with the carried workspace and the whole
task (hidden tests included, from the host) on its read-only disk. The verifier runs
there through the runtime gate, and its record is judged here, on the host.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Self

from guest.task import copy_task_private, load_task, task_digest
from harness.trial.carry import CarryRefused, tar_command, unpack_workspace
from harness.trial.context import TrialContext
from harness.trial.diskfiles import link_or_copy
from harness.trial.evidence import Evidence, StageFailed
from harness.trial.guestcmd import READ_ONLY
from harness.trial.guestrecords import (
    GuestOutputInvalid,
    read_verification,
    unread_verification_record,
)
from harness.trial.guestrun import WORK
from harness.trial.guests import Guest, Guests
from harness.trial.owned import OwnedResources
from harness.trial.stage import TrialState
from harness.trial.vmstage import StartRequest, VmStageFailed, start_verifier_vm, vm_record
from host.cancel import in_thread
from host.image.build import GuestImage
from host.runtime import GuestRuntime
from host.ssh.errors import SshError
from host.vm.categories import Accelerator, AcceleratorReason
from host.vm.errors import VmError
from receipts.records import VerificationRecord
from receipts.records.hostreading import VerifierHostReading
from receipts.treedigest import TreeDigestError, tree_sha256


class Verification:
    """One run of the stage: carry, release the agent's guest, boot the verifier, judge."""

    def __init__(
        self,
        *,
        context: TrialContext,
        scratch: Path,
        owned: OwnedResources,
        runtime: GuestRuntime | None,
        image: GuestImage | None,
        guests: Guests,
        evidence: Evidence,
    ) -> None:
        assert runtime is not None and image is not None
        self.context = context
        self.scratch = scratch
        self.owned = owned
        self.runtime = runtime
        self.image = image
        self.guests = guests
        self.evidence = evidence

    @classmethod
    def of(cls, state: TrialState) -> Self:
        """The stage over the trial's state: what of it verification may touch."""
        return cls(
            context=state.context,
            scratch=state.scratch,
            owned=state.owned,
            runtime=state.prepared.runtime,
            image=state.prepared.image,
            guests=state.guests,
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
        source = await in_thread(self.verifier_source, carried)
        verifier, options = self.guests.verifier, self.context.options
        self.guests.verifier_started = True
        try:
            verifier.handle = await start_verifier_vm(
                profile=self.context.profile,
                image=self.image,
                data_source=source,
                tag=self.context.tag,
                trial_root=self.context.trials_root,
                backend=self.context.backend,
                accelerator=accelerator,
                owned=self.owned,
                starts=StartRequest(options.guest_start, options.cache),
            )
        except VmStageFailed as failure:
            verifier.handle, verifier.category = failure.handle, failure.category
            self._unread("verifier_vm_failed")
            raise StageFailed from None
        try:
            await judge(self.context, self.runtime, verifier, carried_sha256, self.evidence)
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
        """Read the agent guest's VM record, then release that guest before the
        verification guest boots: nothing of it is needed any more, and a 12 GiB guest
        need not sit beside the next. Returns the accelerator the trial chose, which the
        verification guest reuses."""
        agent = self.guests.agent
        assert agent.handle is not None and agent.handle.vm is not None
        facts = agent.handle.vm.facts()
        self.guests.agent_final = vm_record(
            agent.handle,
            agent.category,
            self.context.profile,
            backend=self.context.options.backend,
        )
        await self.owned.release_early("qemu_process")
        return facts.accelerator, facts.accelerator_reason

    def verifier_source(self, workspace: Path) -> Path:
        """The verification guest's read-only disk: the runtime and its pins, the whole
        task from the host (hidden tests and reference solution included) in a directory
        only root can enter, and the carried workspace."""
        root = self.scratch / "verifier-data"
        shutil.copytree(self.runtime.root, root / "runtime", copy_function=link_or_copy)
        shutil.copy(self.runtime.pins, root / "pins.json")
        (root / "task").mkdir(parents=True)
        copy_task_private(self.context.task_dir, root / "task" / self.context.options.task)
        shutil.copytree(workspace, root / "workspace")
        return root


async def judge(
    context: TrialContext,
    runtime: GuestRuntime,
    guest: Guest,
    carried_sha256: str,
    evidence: Evidence,
) -> None:
    """Run the verifier in `guest` and keep its record, cross-checked here against the
    task the host shipped and the workspace it carried (`carried_sha256`,
    receipts.treedigest of the carried tree): a verdict about other tests or other bytes
    than those is no verdict about this trial."""
    record = await run_verifier(context, runtime, guest)
    read = record.task_sha256 is not None  # None only in the host's stand-in
    if read and record.task_sha256 != task_digest(context.task_dir):  # other tests than ours
        record = record.model_copy(update={"category": "runner_error", "result": "failed"})
    elif record.workspace_sha256 is not None and record.workspace_sha256 != carried_sha256:
        record = record.model_copy(update={"category": "workspace_mismatch", "result": "failed"})
    evidence.put("verification", record)
    if record.category != "ok":
        raise StageFailed


async def run_verifier(
    context: TrialContext, runtime: GuestRuntime, guest: Guest
) -> VerificationRecord:
    """guest.verify in `guest`; its record, or the host's stand-in."""
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
    failure = await guest.gated(runtime.pins_sha256, "guest.verify", args, deadline)
    if failure is not None:
        return unread_verification_record(failure)
    try:
        return read_verification(await guest.fetch(f"{WORK}/verification.json"))
    except GuestOutputInvalid:
        return unread_verification_record()
