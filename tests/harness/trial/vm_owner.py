"""A small real orchestrator for the kill -9 test: it owns one running VM acquired
through the trial's own VM stage (harness.trial.vmstage.start_vm: trial cgroup with
its budgets, data disk directory, backend VM), prints the trial tag once SSH answers,
and then waits to be killed. Used for the libvirt backend, which `harness trial` does
not drive yet; the qemu backend is killed inside a real `harness trial` instead.

    python -m tests.harness.trial.vm_owner --backend libvirt --trials-root DIR
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
from pathlib import Path

from harness.profiles import load_profile
from harness.trial.owned import OwnedResources
from harness.trial.vmstage import DiskPlan, StartRequest, start_vm
from host.vm import Accelerator, QemuBackend, VmBackend
from host.vm.lease import TrialLease
from tests.host.image.support import session_image


async def own(backend: VmBackend, trials_root: Path) -> None:
    tag = secrets.token_hex(8)
    TrialLease(trials_root, tag).acquire()  # held until this process dies, as a trial's
    scratch = Path(tempfile.mkdtemp(prefix=f"harness-trial-{tag}-", dir=trials_root))
    (scratch / "data").mkdir()
    (scratch / "data" / "hello.txt").write_text("hello\n")

    async def plan(_accelerator: Accelerator) -> DiskPlan:
        return DiskPlan(scratch / "data", None)  # a scripted trial's plan: no worker channel

    # Both stay referenced while this process waits: the handle holds the VM, whose libvirt
    # connection, once freed, makes libvirt destroy the transient domain (AUTODESTROY).
    owned = OwnedResources()
    handle = await start_vm(
        profile=load_profile("tiny"),
        image=session_image(),
        plan=plan,
        tag=tag,
        trial_root=trials_root,
        backend=backend,
        accel="tcg",
        owned=owned,
        starts=StartRequest("snapshot", trials_root.parent),  # the cache trials use
    )
    print(tag, flush=True)
    await asyncio.sleep(3600)
    assert handle.vm is not None and owned is not None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("qemu", "libvirt"), required=True)
    parser.add_argument("--trials-root", type=Path, required=True)
    args = parser.parse_args()
    backend: VmBackend
    if args.backend == "libvirt":
        from host.vm.libvirt_backend import LibvirtBackend

        backend = LibvirtBackend()
    else:
        backend = QemuBackend()
    asyncio.run(own(backend, args.trials_root))


if __name__ == "__main__":
    main()
