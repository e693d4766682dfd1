"""The VM stage as the trial drives it: the agent's guest, and what goes on its read-only
disk once the accelerator (and with it, where the worker runs) is known.

vmstage.py brings a guest up under its budgets; this module decides what that guest
is given: the runtimes (the agent's, and the worker's own when it runs in the guest),
the task's copy for the agent, the script, and the worker's files.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from harness.trial.context import Prepared, TrialContext
from harness.trial.diskfiles import REPO, link_or_copy
from harness.trial.evidence import StageFailed
from harness.trial.guests import Guest
from harness.trial.owned import OwnedResources
from harness.trial.placement import resolve_placement, worker_for
from harness.trial.vmstage import DiskPlan, StartRequest, VmStageFailed, start_vm
from host.agents.opencode import CliExecutable, CliUnavailable, ensure_opencode
from host.cancel import in_thread
from host.runtime import RuntimeBuildError, RuntimeFailure, build_runtime
from host.vm.categories import Accelerator
from receipts.records.vm import VmCategory

RUNTIME_FAILURES: dict[RuntimeFailure, VmCategory] = {
    "fetch_failed": "runtime_fetch_failed",
    "build_failed": "runtime_build_failed",
    "cache_corrupt": "runtime_cache_corrupt",
}
"""How the guest runtime's failure names the VM stage's (runtime.py builds it there)."""
CLI_FAILURES: dict[str, VmCategory] = {
    "fetch_failed": "runtime_fetch_failed",
    "integrity_mismatch": "runtime_fetch_failed",
    "cache_corrupt": "runtime_cache_corrupt",
}
"""An agent CLI is part of the agent's runtime: its failures name the VM stage's the same
way (fetched and not the pinned bytes is a failed fetch; a cached copy that differs is a
corrupt cache)."""
log = logging.getLogger(__name__)


class AgentDisk:
    """The agent guest's read-only disk, planned once the accelerator is known."""

    def __init__(self, context: TrialContext, scratch: Path, prepared: Prepared) -> None:
        self.context = context
        self.scratch = scratch
        self.prepared = prepared
        self.cli: CliExecutable | None = None

    def build_runtimes(self) -> None:
        """The agent's runtime, and the worker's own when it has one (in the guest: its
        wheels and the guest build of llama.cpp). Raises VmStageFailed with a `runtime_*`
        category (inside the VM stage's plan, so the VM record names it)."""
        cache = self.context.options.cache
        try:
            self.prepared.runtime = build_runtime(
                REPO, cache=cache / "runtimes", wheelsets=cache / "wheelsets"
            )
            if self.prepared.worker is not None:
                self.prepared.worker.runtime(cache)
        except RuntimeBuildError as exc:
            log.warning("guest runtime unavailable: %s", exc.category)
            raise VmStageFailed(RUNTIME_FAILURES[exc.category]) from None
        if self.context.options.agent == "opencode":
            try:
                self.cli = ensure_opencode(cache / "agents")
            except CliUnavailable as exc:
                log.warning("agent CLI unavailable: %s", exc.category)
                raise VmStageFailed(CLI_FAILURES[exc.category]) from None

    def data_source(self) -> Path:
        """The read-only disk's tree: runtime, pins, the agent's task copy, the script."""
        runtime, options = self.prepared.runtime, self.context.options
        assert runtime is not None
        root = self.scratch / "data"
        shutil.copytree(runtime.root, root / "runtime", copy_function=link_or_copy)
        shutil.copy(runtime.pins, root / "pins.json")
        task_copy = root / "task" / options.task
        task_copy.mkdir(parents=True)
        shutil.copy(self.context.task_dir / "task.toml", task_copy / "task.toml")
        shutil.copytree(self.context.task_dir / "workspace", root / "workspace")
        if options.script is not None:
            shutil.copy(options.script, root / "script.json")
        if self.cli is not None:  # hashed just now; the guest hashes it again before it runs
            (root / "agents").mkdir()
            link_or_copy(self.cli.path, root / "agents" / "cli")
        worker, model = self.prepared.worker, self.prepared.model
        if worker is not None:
            worker.disk_files(root, model.gguf if model is not None else None)
        return root

    async def plan(self, accelerator: Accelerator) -> DiskPlan:
        """Once the accelerator is known: where the worker runs, the runtimes, and the
        read-only disk's tree. A tree that cannot be written on the host (disk full,
        permissions) is the VM stage's `data_disk_failed`, not QEMU failing to start."""
        if self.prepared.worker is not None:
            placement = resolve_placement(self.context.placement_requested, accelerator)
            self.prepared.worker = worker_for(placement)
        await in_thread(self.build_runtimes)
        try:
            source = await in_thread(self.data_source)
        except OSError:
            raise VmStageFailed("data_disk_failed") from None
        worker = self.prepared.worker
        return DiskPlan(source, worker.socket(self.scratch) if worker else None)


async def vm_stage(
    context: TrialContext,
    scratch: Path,
    owned: OwnedResources,
    prepared: Prepared,
    guest: Guest,
) -> None:
    """Bring the agent's guest up; its handle (whatever was acquired) goes to `guest`."""
    assert prepared.image is not None
    try:
        guest.handle = await start_vm(
            profile=context.profile,
            image=prepared.image,
            plan=AgentDisk(context, scratch, prepared).plan,
            tag=context.tag,
            trial_root=context.trials_root,
            backend=context.backend,
            accel=context.options.accel,
            owned=owned,
            starts=StartRequest(context.options.guest_start, context.options.cache),
        )
    except VmStageFailed as failure:
        guest.category = failure.category
        guest.handle = failure.handle
        raise StageFailed from None
