"""How a trial's guest starts: restored from a snapshot of its image, or booted cold.

A guest is restored when it can be (host/vm/snapshot.py): the qemu backend, TCG, no
host worker channel, and the trial did not ask for a cold boot. The snapshot for the
guest's shape is read from the cache and hashed again; when there is none, or the one
there fails its digests, this trial makes it (in the guest's own cgroup, under its
budgets) and says so, with the time it took. When making fails, the guest boots cold
and the record says why. Either way the record names how the guest started, so a
reviewer can tell a restored guest from a booted one and the audit can recompute the
snapshot's key from the image the receipt names.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.cancel import in_thread
from host.cgroups import Cgroup
from host.image.build import GuestImage
from host.release import Stopwatch
from host.vm.categories import Accelerator
from host.vm.errors import VmError
from host.vm.snapshot import Snapshot, SnapshotShape, SnapshotStore, qemu_build
from receipts.records.vm import ColdBootReason, GuestStart, SnapshotShapeRecord
from receipts.vocabulary import Backend

GuestStartRequest = Literal["snapshot", "cold"]
"""`--guest-start`: restore where possible (the default), or always boot cold."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StartPlan:
    """The snapshot to restore (None: boot cold) and what the record says of it."""

    snapshot: Snapshot | None
    record: GuestStart


def cold(reason: ColdBootReason, make_ms: int | None = None) -> StartPlan:
    record = GuestStart(
        how="cold_boot",
        snapshot_key=None,
        shape=None,
        found=None,
        make_ms=make_ms,
        cold_boot_reason=reason,
    )
    return StartPlan(None, record)


def cold_reason(
    request: GuestStartRequest,
    backend: Backend,
    accelerator: Accelerator,
    worker_channel: bool,
) -> ColdBootReason | None:
    """Why this guest cannot be restored, or None when it can."""
    if request == "cold":
        return "requested_cold"
    if backend != "qemu":
        return "backend_libvirt"
    if accelerator != "tcg":
        return "accelerator_kvm"
    if worker_channel:
        return "worker_channel"
    return None


@dataclass(frozen=True)
class GuestShape:
    """The guest as the stage sizes it (what a snapshot's key depends on)."""

    accelerator: Accelerator
    memory_mib: int
    vcpus: int
    tb_size_mib: int


async def plan_start(
    *,
    request: GuestStartRequest,
    backend: Backend,
    guest: GuestShape,
    worker_channel: bool,
    image: GuestImage,
    cache: Path,
    cgroup: Cgroup,
    deadline_s: float,
    tag: str,
) -> StartPlan:
    """The snapshot this guest is restored from (made now if the cache has none that
    verifies), or a cold boot and its reason."""
    reason = cold_reason(request, backend, guest.accelerator, worker_channel)
    if reason is not None:
        return cold(reason)
    shape = SnapshotShape(
        image_key=image.key,
        accelerator=guest.accelerator,
        memory_mib=guest.memory_mib,
        vcpus=guest.vcpus,
        tb_size_mib=guest.tb_size_mib,
        qemu=await in_thread(qemu_build),
    )
    store = SnapshotStore(cache / "snapshots")
    watch = Stopwatch()
    try:
        found = await in_thread(store.load, shape)
        make_ms: int | None = None
        if isinstance(found, Snapshot):
            snapshot, held = found, "present"
        else:
            held = found
            watch = Stopwatch()
            snapshot = await store.make(shape, image, cgroup, deadline_s, tag=tag)
            make_ms = watch.ms()
    except (VmError, OSError) as exc:  # the cache unwritable, QEMU not saving: boot
        log.warning("snapshot not had (%s): booting cold", type(exc).__name__)
        return cold("snapshot_failed", watch.ms())
    record = GuestStart(
        how="snapshot",
        snapshot_key=snapshot.key,
        shape=SnapshotShapeRecord(**dataclasses.asdict(shape)),  # what the key is over
        found=held,
        make_ms=make_ms,
        cold_boot_reason=None,
    )
    return StartPlan(snapshot, record)
