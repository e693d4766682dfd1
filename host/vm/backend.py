"""The VM backend protocol every implementation (qemu, libvirt) satisfies.

Why a protocol: the trial pipeline starts a VM, waits until it answers over SSH,
runs commands, moves small files and tears it down, and must not care which backend
did it. Both implementations must pass the same conformance tests. Teardown returns
one `CleanupResult` per owned resource (in release order) so the trial can write
cleanup receipts; it never raises for a resource it could not release, it says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, Unpack

from host.cgroups import Cgroup
from host.release import CleanupResult
from host.ssh import CommandResult
from host.vm.categories import Accelerator, AcceleratorReason
from receipts.records.cleanup import Resource
from receipts.records.vm import GuestStart, QemuEnd, VmCategory, VmRecord
from receipts.vocabulary import Backend

if TYPE_CHECKING:
    from host.vm.snapshotentry import Snapshot


class BootImage(Protocol):
    """What a VM boots: satisfied by host.image.GuestImage."""

    @property
    def vmlinux(self) -> Path: ...

    @property
    def initramfs(self) -> Path: ...

    @property
    def base(self) -> Path: ...


@dataclass(frozen=True)
class VmSpec:
    """One VM: its tag, image, size, accelerator (already chosen) and where it lives."""

    tag: str
    image: BootImage
    cgroup: Cgroup
    scratch_root: Path
    accelerator: Accelerator
    accelerator_reason: AcceleratorReason
    memory_mib: int = 1024
    vcpus: int = 2
    tb_size_mib: int = 64
    data_disk: Path | None = None
    worker_socket: Path | None = None
    """Host placement: the worker socket reached from the guest at 10.0.2.100:8080."""
    cpu_millicores: int | None = None
    """The trial cgroup's CPU budget (1000 = one CPU). The qemu backend's QEMU runs in
    that cgroup; a backend whose QEMU runs elsewhere (libvirt) must apply it there."""
    pids_limit: int | None = None
    """The trial cgroup's pids budget, for the same reason."""
    control: bool = False
    """Boot for the control port (host/vm/control.py): the trial's keys, clock, seed and
    data disk are given after boot. The qemu backend only."""
    snapshot: Snapshot | None = None
    """Restore this snapshot instead of booting (implies `control`)."""

    def __post_init__(self) -> None:
        if self.snapshot is not None and not self.control:
            raise ValueError("a restored guest takes its trial on the control port")
        if self.snapshot is not None and self.worker_socket is not None:
            raise ValueError("a snapshot is saved without the worker's channel")


class VmBudgets(TypedDict, total=False):
    """What the VM record reads from the guest's cgroup, not from the VM itself."""

    memory_limit_bytes: int | None
    swap_limit_bytes: int | None
    cpu_quota_millicores: int | None
    pids_limit: int | None
    peak_memory_bytes: int | None
    oom_kills: int | None


UNREAD_BUDGETS: VmBudgets = {
    "memory_limit_bytes": None,
    "swap_limit_bytes": None,
    "cpu_quota_millicores": None,
    "pids_limit": None,
    "peak_memory_bytes": None,
    "oom_kills": None,
}


@dataclass(frozen=True)
class VmFacts:
    """What the VM record needs from the VM itself (budgets come from the cgroup)."""

    backend: Backend
    accelerator: Accelerator
    accelerator_reason: AcceleratorReason
    guest_memory_bytes: int
    vcpus: int
    host_key_sha256: str
    boot_to_ssh_ms: int | None
    duration_ms: int

    def to_record(
        self,
        category: VmCategory,
        start: GuestStart | None,
        *,
        qemu_end: QemuEnd | None,
        **budgets: Unpack[VmBudgets],
    ) -> VmRecord:
        """The VM record; `start` is how the stage started the guest, `qemu_end` how its
        QEMU ended as far as known now (`Vm.qemu_end`), `budgets` are the cgroup's
        read-back fields (None: unread)."""
        unknown = set(budgets) - set(VmBudgets.__annotations__)
        if unknown:
            raise ValueError("unknown VM record fields")
        return VmRecord(
            category=category,
            backend=self.backend,
            accelerator=self.accelerator,
            accelerator_reason=self.accelerator_reason,
            guest_memory_bytes=self.guest_memory_bytes,
            vcpus=self.vcpus,
            host_key_sha256=self.host_key_sha256,
            boot_to_ssh_ms=self.boot_to_ssh_ms,
            duration_ms=self.duration_ms,
            start=start,
            qemu_end=qemu_end,
            **(UNREAD_BUDGETS | budgets),
        )


class Vm(Protocol):
    """One VM's life: start, wait_ready, exec/put/get, stop, cleanup.

    `cleanup()` may be called at any point after creation, also after `start()`
    failed half way: it releases exactly what was acquired and reports the rest as
    `not_acquired`.
    """

    async def start(self) -> None:
        """Acquire scratch dir, keys, overlay and port, then start the VM process."""
        ...

    async def wait_ready(self, deadline_s: float) -> int:
        """Milliseconds from start until an authenticated SSH command succeeded."""
        ...

    async def exec(self, command: str, deadline_s: float) -> CommandResult: ...

    async def put(self, local: Path, remote: str, deadline_s: float) -> int: ...

    async def get(self, remote: str, local: Path, deadline_s: float) -> int: ...

    async def stop(self, deadline_s: float) -> CleanupResult:
        """End the VM (orderly first, then forcibly); the process's cleanup result."""
        ...

    async def cleanup(self) -> tuple[CleanupResult, ...]:
        """Release every owned resource in reverse order of acquisition."""
        ...

    def facts(self) -> VmFacts: ...

    def qemu_pid(self) -> int | None:
        """The guest's QEMU process (ours for qemu, libvirtd's child for libvirt)."""
        ...

    def qemu_end(self) -> QemuEnd | None:
        """How the guest's QEMU ended, once `stop` reaped it; None before that, and
        whenever the end is not this backend's to read (never guessed)."""
        ...

    def alive(self) -> bool:
        """Whether that QEMU still runs."""
        ...


class VmBackend(Protocol):
    """Starts VMs of one kind."""

    @property
    def name(self) -> Backend: ...

    @property
    def owns(self) -> tuple[Resource, ...]:
        """What one guest of this backend owns (receipts/ownership.py)."""
        ...

    def create(self, spec: VmSpec) -> Vm:
        """A VM for `spec`, nothing acquired yet (register its cleanup, then start)."""
        ...
