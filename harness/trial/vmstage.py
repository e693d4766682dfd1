"""The VM stage: a budgeted cgroup, the read-only data disk, and a guest reachable by SSH.

Every acquisition registers its release first, through the guest's owner (what its
backend declares, receipts/ownership.py), so a failure half way releases exactly what
was taken. Budgets are applied to the cgroup and read back; the
VM record carries the read-back values, not the requested ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from harness.profiles import Profile
from harness.trial.gueststart import GuestShape, GuestStartRequest, plan_start
from harness.trial.owned import OwnedResources, Owner, cgroup_release
from host.cancel import in_thread
from host.cgroups import Cgroup
from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.image.build import GuestImage
from host.image.disk import build_data_disk
from host.image.errors import ImageError
from host.release import CleanupResult, remove_dir
from host.vm.accel import choose_accelerator
from host.vm.backend import Vm, VmBackend, VmBudgets, VmSpec
from host.vm.budgets import (
    BudgetUnread,
    cpu_limit_of,
    memory_dir_of,
    memory_limit_of,
    memory_record_readings,
    pids_limit_of,
    swap_limit_of,
)
from host.vm.categories import Accelerator, AcceleratorReason, AccelRequest
from host.vm.errors import VmError
from receipts.records import VmRecord
from receipts.records.vm import GuestStart, VmCategory
from receipts.vocabulary import Backend

MIB = 1 << 20
CPU_PERIOD_US = 100_000


@dataclass
class VmHandle:
    """What the VM stage acquired and measured so far (filled in as it goes)."""

    cgroup: Cgroup
    owner: Owner
    """Where this guest's resources are registered (its QEMU is released by it early)."""
    memory_limit: int | None = None
    swap_limit: int | None = None
    cpu_quota_millicores: int | None = None
    pids_limit: int | None = None
    vm: Vm | None = None
    boot_to_ssh_ms: int | None = None
    memory_dir: Path | None = None
    """The memory cgroup QEMU is charged to (the trial's, or libvirt's), once started."""
    start: GuestStart | None = None
    """How the guest started (restored or booted), once decided (gueststart.py)."""


@dataclass(frozen=True)
class StartRequest:
    """What the trial asks of its guests' start: restore or cold (`--guest-start`), and
    the cache whose `snapshots/` holds the snapshots."""

    request: GuestStartRequest
    cache: Path


@dataclass(frozen=True)
class DiskPlan:
    """What the trial puts on the read-only disk and where the worker channel ends."""

    data_source: Path
    worker_socket: Path | None
    """The host worker's socket for the guestfwd channel; None when there is no channel."""


class VmStageFailed(Exception):
    """The VM stage failed; `handle` keeps what it had acquired, for the record."""

    def __init__(self, category: VmCategory, handle: VmHandle | None = None) -> None:
        super().__init__(category)
        self.category: VmCategory = category
        self.handle = handle


VERIFIER_MEMORY_MIB = 1024
"""The verification guest's RAM (capped by the profile's): it runs the hidden tests only,
never the model, so a profile sized for a 4B model's worker needs no more here."""


def verifier_memory_bytes(profile: Profile) -> int:
    """The verification guest's RAM: the profile's, capped at VERIFIER_MEMORY_MIB."""
    return min(profile.memory.guest_ram // MIB, VERIFIER_MEMORY_MIB) * MIB


@dataclass(frozen=True)
class _Names:
    """What one guest of a trial is called on the host (host/vm/leftovers.py finds each)."""

    cgroup: str
    data_dir: str


def _names(tag: str, role: str) -> _Names:
    if role == "agent":
        return _Names(cgroup=f"trial-{tag}", data_dir=f"data-{tag}")
    return _Names(cgroup=f"verifier-{tag}", data_dir=f"verifier-data-{tag}")


async def start_vm(
    *,
    profile: Profile,
    image: GuestImage,
    plan: Callable[[Accelerator], Awaitable[DiskPlan]],
    tag: str,
    trial_root: Path,
    backend: VmBackend,
    accel: AccelRequest,
    owned: OwnedResources,
    starts: StartRequest,
) -> VmHandle:
    """Bring the agent's guest up under its budgets; raises VmStageFailed with the category.

    The accelerator is chosen first, because what goes on the read-only disk and
    whether a worker channel exists depend on it (`auto` placement); `plan` is asked
    for both once the choice is known. A `plan` that cannot be made raises
    VmStageFailed with its category; the stage re-raises it with what it had
    acquired, so the VM record is written like any other failure of the stage."""
    owner = owned.owner(backend.owns)
    handle, disk_dir = _acquire(profile, tag, "agent", trial_root, owner)
    try:
        choice = await choose_accelerator(
            accel,
            image.vmlinux,
            image.initramfs,
            cgroup=handle.cgroup,
            scratch_root=trial_root,
            tag=tag,
        )
        try:
            disk_plan = await plan(choice.accelerator)
        except VmStageFailed as failed:
            raise VmStageFailed(failed.category, handle) from None
    except VmError as exc:
        raise VmStageFailed(exc.category, handle) from None
    except OSError:
        raise VmStageFailed("qemu_start_failed", handle) from None
    await _boot(
        handle,
        disk_dir,
        profile=profile,
        image=image,
        tag=tag,
        trial_root=trial_root,
        backend=backend,
        accelerator=(choice.accelerator, choice.reason),
        disk_plan=disk_plan,
        memory_mib=profile.memory.guest_ram // MIB,
        owner=owner,
        starts=starts,
    )
    return handle


async def start_verifier_vm(
    *,
    profile: Profile,
    image: GuestImage,
    data_source: Path,
    tag: str,
    trial_root: Path,
    backend: VmBackend,
    accelerator: tuple[Accelerator, AcceleratorReason],
    owned: OwnedResources,
    starts: StartRequest,
    yield_cpu: bool = False,
) -> VmHandle:
    """A second guest, started from the same pristine content-keyed image in a new overlay
    (booted, or restored from the image's snapshot: gueststart.py),
    for the hidden tests only: nothing the agent's code did to its own guest (a planted
    `sitecustomize`, a process left running, a rewritten interpreter) exists here. Its
    only inputs are the read-only disk built from `data_source` on the host. It has its
    own cgroup (`verifier-<tag>`, same budgets but a smaller guest) and no worker channel.
    The accelerator is the one the trial already chose: no second probe boot.
    `yield_cpu`: started beside the agent's guest, it takes the lowest CPU weight, so
    that its start and the verifier's imports use only what the agent's side leaves
    (verifierprep.py gives the default back before the hidden tests run)."""
    owner = owned.owner(backend.owns)
    handle, disk_dir = _acquire(profile, tag, "verifier", trial_root, owner, yield_cpu=yield_cpu)
    await _boot(
        handle,
        disk_dir,
        profile=profile,
        image=image,
        tag=tag,
        trial_root=trial_root,
        backend=backend,
        accelerator=accelerator,
        disk_plan=DiskPlan(data_source, None),
        memory_mib=verifier_memory_bytes(profile) // MIB,
        owner=owner,
        starts=starts,
    )
    return handle


def _acquire(
    profile: Profile,
    tag: str,
    role: str,
    trial_root: Path,
    owner: Owner,
    *,
    yield_cpu: bool = False,
) -> tuple[VmHandle, Path]:
    """The guest's cgroup with the profile's budgets read back, and its data disk folder;
    each registered for release as soon as it exists."""
    names = _names(tag, role)
    try:
        cgroup = detect().create(names.cgroup)
    except (CgroupError, OSError):
        raise VmStageFailed("cgroup_apply_failed") from None
    owner.register("cgroup", cgroup_release(cgroup))
    handle = VmHandle(cgroup, owner)
    try:
        memory = cgroup.set_memory_limit(profile.memory.qemu_cgroup_limit)
        handle.memory_limit, handle.swap_limit = memory.limit_bytes, memory.swap_bytes
        cpu = cgroup.set_cpu_quota(profile.vm.vcpus * CPU_PERIOD_US, CPU_PERIOD_US)
        handle.cpu_quota_millicores = cpu.quota_us * 1000 // cpu.period_us
        handle.pids_limit = cgroup.set_pids_limit(profile.vm.pids_limit).max_pids
        if yield_cpu:
            cgroup.set_cpu_weight_lowest()
    except (CgroupError, OSError):
        raise VmStageFailed("cgroup_apply_failed", handle) from None

    disk_dir = trial_root / names.data_dir
    disk_dir.mkdir(mode=0o700, parents=True)

    async def release_disk() -> tuple[CleanupResult, ...]:
        return (remove_dir(disk_dir, "data_disk"),)

    owner.register("data_disk", release_disk)
    return handle, disk_dir


async def _boot(
    handle: VmHandle,
    disk_dir: Path,
    *,
    profile: Profile,
    image: GuestImage,
    tag: str,
    trial_root: Path,
    backend: VmBackend,
    accelerator: tuple[Accelerator, AcceleratorReason],
    disk_plan: DiskPlan,
    memory_mib: int,
    owner: Owner,
    starts: StartRequest,
) -> None:
    """Data disk, how the guest starts, QEMU in the handle's cgroup, budgets checked where
    QEMU runs, SSH."""
    try:
        data_disk = await in_thread(  # mkfs into disk_dir: done before its release removes it
            build_data_disk, disk_plan.data_source, disk_dir / "data.img"
        )
    except ImageError:
        raise VmStageFailed("data_disk_failed", handle) from None
    shape = GuestShape(accelerator[0], memory_mib, profile.vm.vcpus, profile.vm.tcg_tb_size_mib)
    plan = await plan_start(
        request=starts.request,
        backend=backend.name,
        guest=shape,
        worker_channel=disk_plan.worker_socket is not None,
        image=image,
        cache=starts.cache,
        cgroup=handle.cgroup,
        deadline_s=float(profile.vm.ssh_deadline_s),
        tag=tag,
    )
    handle.start = plan.record
    try:
        spec = VmSpec(
            tag=tag,
            image=image,
            cgroup=handle.cgroup,
            scratch_root=trial_root,
            accelerator=accelerator[0],
            accelerator_reason=accelerator[1],
            memory_mib=memory_mib,
            vcpus=profile.vm.vcpus,
            tb_size_mib=profile.vm.tcg_tb_size_mib,
            data_disk=data_disk.path,
            worker_socket=disk_plan.worker_socket,
            cpu_millicores=handle.cpu_quota_millicores,
            pids_limit=handle.pids_limit,
            control=plan.snapshot is not None,
            snapshot=plan.snapshot,
        )
        vm = backend.create(spec)
        owner.register("qemu_process", vm.cleanup)
        handle.vm = vm
        await vm.start()
        handle.memory_dir = _check_budgets_in_effect(vm, handle)
        handle.boot_to_ssh_ms = await vm.wait_ready(float(profile.vm.ssh_deadline_s))
    except VmError as exc:
        raise VmStageFailed(exc.category, handle) from None
    except OSError:
        raise VmStageFailed("qemu_start_failed", handle) from None


def _check_budgets_in_effect(vm: Vm, handle: VmHandle) -> Path:
    """Read every budget where QEMU really runs (host/vm/budgets.py) and refuse a guest
    whose budgets differ from the trial cgroup's read-back values: the record states
    what bound QEMU, for either backend. Returns QEMU's memory cgroup directory."""
    pid = vm.qemu_pid()
    if pid is None:
        raise VmError("qemu_start_failed")
    try:
        in_effect = (
            memory_limit_of(pid),
            swap_limit_of(pid),
            cpu_limit_of(pid),
            pids_limit_of(pid),
        )
        memory_dir = memory_dir_of(pid)
    except BudgetUnread:
        raise VmError("cgroup_apply_failed") from None
    declared = (
        handle.memory_limit,
        handle.swap_limit,
        handle.cpu_quota_millicores,
        handle.pids_limit,
    )
    if in_effect != declared:
        raise VmError("cgroup_apply_failed")
    return memory_dir


def vm_record(
    handle: VmHandle | None,
    category: VmCategory,
    profile: Profile,
    *,
    backend: Backend,
    guest_memory_bytes: int | None = None,
) -> VmRecord:
    """The VM record, with the cgroup's peak memory and OOM kills read now. Facts the
    stage never learnt (a VM that never started; no handle at all when its cgroup could
    not be made) stay None, never guessed; the guest's RAM is the profile's unless the
    guest was sized otherwise (`guest_memory_bytes`). `qemu_end` is how QEMU ended as far
    as known now: read before the guest is stopped, the record is completed after
    (`Guest.ended`)."""
    peak = oom = None
    with contextlib.suppress(CgroupError, OSError):
        if handle is None:
            pass
        elif handle.memory_dir is not None:  # where QEMU's memory is charged
            peak_reading, oom_reading = memory_record_readings(handle.memory_dir)
            peak = peak_reading.value if peak_reading.state == "present" else None
            oom = oom_reading.value if oom_reading.state == "present" else None
        else:
            readings = handle.cgroup.read_memory()
            peak = readings.peak.value if readings.peak.state == "present" else None
            oom = readings.oom_kills.value if readings.oom_kills.state == "present" else None
    if oom and category in ("ok", "qemu_exited", "ssh_dropped"):
        category = "oom_killed"
    budgets: VmBudgets = {
        "memory_limit_bytes": handle.memory_limit if handle else None,
        "swap_limit_bytes": handle.swap_limit if handle else None,
        "cpu_quota_millicores": handle.cpu_quota_millicores if handle else None,
        "pids_limit": handle.pids_limit if handle else None,
        "peak_memory_bytes": peak,
        "oom_kills": oom,
    }
    vm = handle.vm if handle is not None else None
    try:
        facts = vm.facts() if vm is not None else None
    except VmError:
        facts = None
    start = handle.start if handle is not None else None
    qemu_end = vm.qemu_end() if vm is not None else None
    if facts is not None:
        return facts.to_record(category, start, qemu_end=qemu_end, **budgets)
    return VmRecord(
        category=category,
        backend=backend,
        accelerator=None,
        accelerator_reason=None,
        guest_memory_bytes=guest_memory_bytes or profile.memory.guest_ram,
        vcpus=profile.vm.vcpus,
        host_key_sha256=None,
        boot_to_ssh_ms=None,
        duration_ms=0,
        start=start,
        qemu_end=qemu_end,
        **budgets,
    )
