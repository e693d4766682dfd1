"""The trial's two guests as the stages use them: the agent's, and the verification guest.

Each `Guest` holds its VM stage's handle once acquired and the category its VM record
will carry, and is the one way a stage reaches it: commands (gated or not), the files
a guest process wrote, whether its QEMU is gone, whether its disk is full. A stage is
handed the guest it may use, never the other.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from harness.profiles import Profile
from harness.trial.evidence import StageFailed
from harness.trial.guestcmd import GATE_SOURCE, command_failure, gated_command
from harness.trial.guestdisk import probe_disk
from harness.trial.guestrecords import GuestOutputInvalid
from harness.trial.vmstage import VmHandle, verifier_memory_bytes, vm_record
from host.ssh import CommandResult, SshSession
from host.ssh.errors import SshError
from host.vm.backend import Vm
from host.vm.guest import GuestVm
from receipts.records import VerifierVmRecord, VmRecord
from receipts.records.hostreading import GuestCommandFailure
from receipts.records.vm import VerifierPrepared, VmCategory
from receipts.vocabulary import Backend

R = TypeVar("R", VmRecord, VerifierVmRecord)


class Guest:
    """One guest: its handle (None until its VM stage acquired one) and how it ended."""

    def __init__(self) -> None:
        self.handle: VmHandle | None = None
        self.category: VmCategory = "ok"

    def vm(self) -> Vm:
        if self.handle is None or self.handle.vm is None:
            raise StageFailed
        return self.handle.vm

    def session(self) -> SshSession:
        vm = self.vm()
        if not isinstance(vm, GuestVm):
            raise StageFailed
        return vm.session()

    async def run(
        self, command: str, deadline_s: float, stdin: bytes | None = None
    ) -> CommandResult:
        """Run a command in the guest (stdin carries the gate's source when gated)."""
        return await self.session().run(command, deadline_s=deadline_s, stdin=stdin)

    async def gated(
        self, pins_sha256: str, module: str, args: list[str], deadline_s: float
    ) -> GuestCommandFailure | None:
        """Run `module` in the guest through the runtime gate; how it ended as the host reads
        it (guestcmd.command_failure), or None when the gate let it run and it exited 0.

        Why not just the exit status: a stage that raised on a non-zero exit wrote no
        record, so a crashed, killed or refused agent or verifier left a receipt that did
        not audit (record_missing). The host's deadline passing is `deadline_exceeded`
        only while QEMU still runs; if QEMU is gone the SSH error goes on, and the VM's
        record names the failure (`qemu_exited`) as for any lost guest."""
        command = gated_command(pins_sha256, module, *args)
        try:
            result = await self.run(command, deadline_s, stdin=GATE_SOURCE)
        except SshError as exc:
            if exc.category != "command_timeout" or await self.gone():
                raise
            return "deadline_exceeded"
        return command_failure(result)

    async def fetch(self, remote: str) -> bytes:
        """A record file the guest wrote. One over the transfer limit is the guest's output
        refused (`too_large`), not a lost connection."""
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "output.json"
            try:
                await self.vm().get(remote, local, 60.0)
            except SshError as exc:
                if exc.category != "transfer_too_large":
                    raise
                raise GuestOutputInvalid("too_large") from None
            return local.read_bytes()

    async def gone(self) -> bool:
        """Whether the guest's QEMU process has exited (vs. only the SSH link failing). It
        waits up to 2 s for the exit to show without holding the event loop: a stop
        signal or the memory sampler must not wait on it."""
        vm = self.handle.vm if self.handle is not None else None
        if not isinstance(vm, GuestVm):
            return False
        settle = time.monotonic() + 2.0  # the SSH error can arrive before the exit is visible
        while vm.alive() and time.monotonic() < settle:
            await asyncio.sleep(0.05)
        return not vm.alive()

    def ended(self, record: R) -> R:
        """This guest's `record`, completed with how its QEMU ended: call it once the
        guest's `qemu_process` was released (its QEMU stopped and, by the qemu backend,
        reaped). Every other field stays as it was read."""
        vm = self.handle.vm if self.handle is not None else None
        return record.ended(vm.qemu_end() if vm is not None else None)

    async def disk_full(self) -> bool:
        """After a stage failed in this guest: if its disk is full, that names the failure
        (`guest_disk_full`, a VM category). Only a probe that read `full` decides."""
        vm = self.handle.vm if self.handle is not None else None
        if not isinstance(vm, GuestVm) or not vm.alive():
            return False
        try:
            state = await probe_disk(self.run)
        except StageFailed:
            return False
        if state != "full":
            return False
        self.category = "guest_disk_full"
        return True


@dataclass
class Guests:
    """The agent's guest, and the pristine one the hidden tests run in."""

    agent: Guest = field(default_factory=Guest)
    verifier: Guest = field(default_factory=Guest)
    agent_final: VmRecord | None = None
    """The agent guest's record, once read before that guest was released early (its
    QEMU's end is added at teardown, `Guest.ended`)."""
    verifier_started: bool = False
    """Whether the verification guest was attempted: then it has a record, even when its
    cgroup could not be made (no handle)."""

    def memory_dir(self) -> Path | None:
        """The memory cgroup of the guest the trial is working in: the agent's until it is
        released, then the verifier's (which may have started beside it)."""
        if self.agent_final is None and self.agent.handle is not None:
            return self.agent.handle.memory_dir
        return self.verifier.handle.memory_dir if self.verifier.handle is not None else None

    def agent_record(self, profile: Profile, backend: Backend) -> VmRecord | None:
        """The agent guest's VM record (read now, or kept from its early release); None
        when the VM stage never acquired anything."""
        if self.agent_final is not None:
            return self.agent_final
        if self.agent.handle is None:
            return None
        return vm_record(self.agent.handle, self.agent.category, profile, backend=backend)

    def verifier_record(
        self, profile: Profile, backend: Backend, prepared: VerifierPrepared | None
    ) -> VerifierVmRecord | None:
        """The verification guest's record, once it was begun (`prepared` says when)."""
        if not self.verifier_started or prepared is None:
            return None
        return VerifierVmRecord.of(
            vm_record(
                self.verifier.handle,
                self.verifier.category,
                profile,
                backend=backend,
                guest_memory_bytes=verifier_memory_bytes(profile),
            ),
            prepared,
        )
