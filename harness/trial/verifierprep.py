"""The verification guest, made ready while the agent works.

Why: under TCG the verification guest's start (restore or boot, ~1.3 s), its runtime
gate (~2 s) and the verifier's imports (~3 s) took most of the verification stage, and
none of them depends on what the agent did. So, when the host's memory allows both
guests at once (`spare_for_verifier`) and it has a core for each harness guest
(`cores_for_another_guest`), they run beside the agent: the verifier is
started through the gate as soon as its guest is up and waits, imported and with the
task hashed, for the carried workspace (guest/verify/__main__.py `--wait-for`). The
verification stage then waits only for the carry, the transfer and the tests. Where
memory does not allow it, the same preparation runs after the agent's guest is released,
as before; the verifier's record says which (`prepared`).

What the agent's code can reach of the waiting guest: nothing. It is another QEMU with
its own cgroup and restricted user networking (neither guest can reach the host or any
other guest: tests/host/vm/test_conformance.py), and its read-only disk holds only the
runtime, its pins and the task from the host. What reaches it from the agent's side is
the carried workspace, once the agent's guest has stopped, as an archive the host built
from the regular files it carried (carry.py); the verifier reads nothing of the
workspace before the host marks it complete.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guest.task import copy_task_private, load_task
from harness.trial.carry import pack_workspace
from harness.trial.context import Prepared, TrialContext
from harness.trial.diskfiles import link_or_copy
from harness.trial.guestcmd import READ_ONLY
from harness.trial.guestrun import GATE_DEADLINE_S, WORK
from harness.trial.guests import Guest, Guests
from harness.trial.memsampler import directory_figures, host_memory, memory_dir_of_pid
from harness.trial.owned import OwnedResources
from harness.trial.vmstage import StartRequest, VmStageFailed, start_verifier_vm
from host.cancel import in_thread
from host.cgroups.errors import CgroupError
from host.image.build import GuestImage
from host.runtime import GuestRuntime
from host.vm.categories import Accelerator, AcceleratorReason
from host.vm.leftovers import find_processes
from receipts.records.hostreading import GuestCommandFailure
from receipts.records.vm import VerifierPrepared

CARRIED = f"{WORK}/carried"
"""Where the carried workspace is unpacked in the verification guest."""
CARRIED_ARCHIVE = f"{WORK}/carried.tar"
CARRIED_READY = f"{WORK}/carried.ready"
"""Made by the host once CARRIED is complete; the waiting verifier starts on it."""
TRANSFER_DEADLINE_S = 120.0
CARRY_MARGIN_S = 600.0
"""Beyond the agent's own deadlines: stopping the worker, packing and fetching the final
workspace (each bounded by its own deadline, well under this)."""


def spare_for_verifier(
    available: int | None,
    agent_qemu: tuple[int, int | None],
    worker: tuple[int, int | None] | None,
    verifier_limit: int,
) -> int | None:
    """The host memory left for a verification guest beside the agent's: MemAvailable
    less what the agent's QEMU and the host worker may still grow by (each `(limit,
    usage)`: up to its cgroup limit, its whole limit when its usage does not read). None
    when MemAvailable does not read. The verification guest may start beside the agent
    only when this covers its own cgroup limit: then neither the agent's guest nor the
    worker can be pressed by it, whatever they do."""
    if available is None:
        return None
    outstanding = sum(
        limit - min(usage, limit) if usage is not None else limit
        for limit, usage in (agent_qemu, *([worker] if worker is not None else []))
    )
    return available - outstanding - verifier_limit


def cores_for_another_guest(running: int, cores: int | None) -> bool:
    """Whether one more guest keeps the host at no more guests than cores: `running` is
    every harness QEMU on the host now (other trials' included), `cores` the host's CPU
    count (None when it does not read: no)."""
    return cores is not None and running + 1 <= cores


def host_available() -> int | None:
    """The host's MemAvailable now (memsampler.host_memory); None when it does not read."""
    return host_memory()[0]


class NotDelivered(Exception):
    """The verification guest did not take the carried workspace (its unpacking failed):
    recorded as `workspace_not_carried`, nothing was verified."""


@dataclass
class _Started:
    running: asyncio.Task[GuestCommandFailure | None]
    """The gated verifier, waiting for CARRIED_READY."""


class VerifierPreparation:
    """The verification guest's start and the verifier's, begun beside the agent or after
    its guest is released; `ready` hands the stage the waiting verifier."""

    def __init__(
        self,
        *,
        context: TrialContext,
        scratch: Path,
        owned: OwnedResources,
        prepared: Prepared,
        guests: Guests,
    ) -> None:
        self.context = context
        self.scratch = scratch
        self.owned = owned
        self.prepared = prepared
        self.guests = guests
        self.when: VerifierPrepared | None = None
        self._task: asyncio.Task[_Started] | None = None

    @property
    def verifier(self) -> Guest:
        return self.guests.verifier

    def begun(self) -> bool:
        return self._task is not None

    def admitted_beside(self) -> bool:
        """Whether the host can hold the verification guest beside the agent's now: no
        more harness guests than cores with it (`cores_for_another_guest`), and memory
        (`spare_for_verifier` >= 0, read from the agent guest's and the host worker's
        memory cgroups and MemAvailable). Never under libvirt: both guests' domains would
        be named by the trial's tag (host/vm/tags.py), and libvirt keeps names unique."""
        if self.context.backend.name == "libvirt":
            return False  # a trial's domain has one name (its tag): one guest at a time
        if not cores_for_another_guest(len(find_processes(qemu_only=True)), os.cpu_count()):
            return False  # TCG guests are CPU-bound: no more of them than cores
        memory = self.context.profile.memory
        agent = self.guests.agent.handle
        agent_usage = directory_figures(agent.memory_dir if agent else None)[0]
        worker = self.prepared.worker
        worker_figures = None
        if worker is not None and worker.placement == "host":
            usage = directory_figures(memory_dir_of_pid(worker.memory_pid()))[0]
            worker_figures = (memory.worker_cgroup_limit, usage)
        spare = spare_for_verifier(
            host_available(),
            (memory.qemu_cgroup_limit, agent_usage),
            worker_figures,
            memory.qemu_cgroup_limit,
        )
        return spare is not None and spare >= 0

    def begin_beside_agent(self) -> None:
        """Once the agent's guest is up (the gate stage begins), start preparing beside it
        if the host's memory holds both (`admitted_beside`); otherwise the verification
        stage begins it after the agent's guest is released."""
        agent = self.guests.agent.handle
        if agent is None or agent.vm is None or not self.admitted_beside():
            return
        facts = agent.vm.facts()
        self.begin((facts.accelerator, facts.accelerator_reason), "beside_agent")

    def begin(
        self, accelerator: tuple[Accelerator, AcceleratorReason], when: VerifierPrepared
    ) -> None:
        """Start preparing now, in the background; `ready` awaits it."""
        assert self._task is None
        self.when = when
        self.guests.verifier_started = True  # from here it has a record
        self._task = asyncio.ensure_future(self._prepare(accelerator))

    async def ready(self) -> asyncio.Task[GuestCommandFailure | None]:
        """The waiting verifier; raises VmStageFailed when its guest did not start,
        SshError or VmError when it was lost after, NotDelivered when it has no `/work`."""
        assert self._task is not None
        return (await self._task).running

    async def abandon(self) -> None:
        """Stop waiting on what was begun (the trial ends without verifying, or after):
        the preparation and the verifier's command are cancelled and awaited. What they
        ended with is read by no one any more: the verification stage took what it
        needed, or was void. The guest itself is released with the trial's resources."""
        task, self._task = self._task, None
        if task is None:
            return
        pending: list[asyncio.Future[Any]] = [task]
        if task.done() and not task.cancelled() and task.exception() is None:
            pending.append(task.result().running)
        for each in pending:
            each.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def take_full_cpu_share(self) -> None:
        """The agent's guest is gone: a verifier that yielded the CPU beside it takes the
        default share back, so that the hidden tests' wall deadline is never spent
        waiting behind other work on the host (another trial's guests). Raises
        VmStageFailed (`cgroup_apply_failed`) when the share does not take."""
        handle = self.verifier.handle
        if self.when != "beside_agent" or handle is None:
            return
        try:
            handle.cgroup.set_cpu_weight_default()
        except (CgroupError, OSError):
            raise VmStageFailed("cgroup_apply_failed", handle) from None

    async def send(self, workspace: Path) -> None:
        """The carried workspace into the waiting guest, then the mark that it is whole.
        Raises SshError or VmError (the guest was lost) or StageFailed."""
        archive = self.scratch / "carried.tar"
        await in_thread(pack_workspace, workspace, archive)
        try:
            await self.verifier.vm().put(archive, CARRIED_ARCHIVE, TRANSFER_DEADLINE_S)
        finally:
            archive.unlink(missing_ok=True)
        unpacked = await self.verifier.run(
            f"mkdir -m 0700 {CARRIED} && tar --no-same-owner -C {CARRIED} -xf {CARRIED_ARCHIVE}"
            f" && rm {CARRIED_ARCHIVE} && : > {CARRIED_READY}",
            TRANSFER_DEADLINE_S,
        )
        if unpacked.exit_status != 0:
            raise NotDelivered

    def _wait_s(self) -> float:
        """How long the verifier waits for the workspace: every deadline the agent's side
        may still use, and the carry's margin."""
        profile = self.context.profile
        worker = self.prepared.worker
        return (
            GATE_DEADLINE_S
            + (worker.ready_deadline_s if worker is not None else 0.0)
            + float(profile.agent.wall_deadline_s)
            + CARRY_MARGIN_S
        )

    async def _prepare(self, accelerator: tuple[Accelerator, AcceleratorReason]) -> _Started:
        source = await in_thread(self.disk_source)
        options = self.context.options
        try:
            self.verifier.handle = await start_verifier_vm(
                profile=self.context.profile,
                image=self._image(),
                data_source=source,
                tag=self.context.tag,
                trial_root=self.context.trials_root,
                backend=self.context.backend,
                accelerator=accelerator,
                owned=self.owned,
                starts=StartRequest(options.guest_start, options.cache),
                yield_cpu=self.when == "beside_agent",
            )
        except VmStageFailed as failure:
            self.verifier.handle = failure.handle
            raise
        made = await self.verifier.run(f"mkdir -m 0755 -p {WORK}", TRANSFER_DEADLINE_S)
        if made.exit_status != 0:
            raise NotDelivered  # nowhere to put the workspace: nothing can be verified
        wait_s = self._wait_s()
        task = load_task(self.context.task_dir)
        args = [
            "--task-dir",
            f"{READ_ONLY}/task/{options.task}",
            "--workspace",
            CARRIED,
            "--scratch",
            f"{WORK}/verify",
            "--records",
            f"{WORK}/verification.json",
            "--wait-for",
            CARRIED_READY,
            "--wait-s",
            str(wait_s),
        ]
        deadline = wait_s + float(task.hidden.deadline_s) + 60.0
        running = asyncio.ensure_future(
            self.verifier.gated(self._runtime().pins_sha256, "guest.verify", args, deadline)
        )
        return _Started(running)

    def _runtime(self) -> GuestRuntime:
        assert self.prepared.runtime is not None
        return self.prepared.runtime

    def _image(self) -> GuestImage:
        assert self.prepared.image is not None
        return self.prepared.image

    def disk_source(self) -> Path:
        """The verification guest's read-only disk: the runtime and its pins, and the
        whole task from the host (hidden tests and reference solution included) in a
        directory only root can enter. The workspace comes later (`send`)."""
        runtime = self._runtime()
        root = self.scratch / "verifier-data"
        shutil.copytree(runtime.root, root / "runtime", copy_function=link_or_copy)
        shutil.copy(runtime.pins, root / "pins.json")
        (root / "task").mkdir(parents=True)
        copy_task_private(self.context.task_dir, root / "task" / self.context.options.task)
        return root
