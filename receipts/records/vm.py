"""The VM: backend, accelerator and why, budgets as read back, and how it ended."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, StringConstraints, model_validator

from receipts.records.base import Part, Record
from receipts.records.preflight import AcceleratorReason
from receipts.types import ByteCount, Count, Millis, Sha256Hex
from receipts.vocabulary import Accelerator, Backend

VmCategoryV1 = Literal[
    "ok",
    "cgroup_apply_failed",
    "qemu_start_failed",
    "qemu_exited",
    "boot_timeout",
    "ssh_timeout",
    "ssh_dropped",
    "host_key_mismatch",
    "provision_timeout",
    "vm_deadline_exceeded",
    "oom_killed",
    "guest_disk_full",
    "runtime_fetch_failed",
    "runtime_build_failed",
    "runtime_cache_corrupt",
    "data_disk_failed",
]
"""The categories of `vm/1` and `verifier_vm/1`."""

VmCategory = VmCategoryV1 | Literal["control_failed"]
"""The `runtime_*` categories: the guest runtime for the read-only disk (our guest code
and its pinned wheels, host/runtime.py) could not be had before QEMU started:
`runtime_fetch_failed` when it needed the network and could not reach it.
`data_disk_failed`: the read-only disk (its tree or its ext4 image) could not be written
on the host before QEMU started (disk full, permissions).
`control_failed` (`vm/2`): a guest on the control port (a restored one) closed it or
said anything but its two lines (host/vm/control.py) while QEMU still ran."""


ColdBootReason = Literal[
    "requested_cold",
    "backend_libvirt",
    "accelerator_kvm",
    "worker_channel",
    "snapshot_failed",
]
"""Why a guest booted instead of being restored: the trial asked (`--guest-start cold`);
the libvirt backend (its domains boot with fw_cfg keys only); KVM (snapshots are made
and measured under TCG only); the host worker's channel (a snapshot is saved without
it); or no snapshot could be had (`snapshot_failed`: making one failed)."""

SnapshotFound = Literal["present", "absent", "digest_mismatch", "unreadable"]
"""What the snapshot cache held for the guest's key when asked: a verified entry
(`present`), none, or one refused (its files did not hash to its manifest; its manifest
could not be read). Anything but `present` was made again by this trial."""

QemuBuild = Annotated[str, StringConstraints(pattern=r"^[ -~]{1,160}$")]
"""QEMU's own `--version` line: a migration stream is read back by its own build only."""


class SnapshotShapeRecord(Part):
    """What a snapshot's key is computed from (receipts/snapshotkey.py)."""

    image_key: Sha256Hex
    accelerator: Accelerator
    memory_mib: Count
    vcpus: Count
    tb_size_mib: Count
    qemu: QemuBuild


class GuestStart(Part):
    """How the guest started: restored from a snapshot (its key and shape, what the cache
    held, and the time this trial spent making it when it had to), or booted cold and
    why. `boot_to_ssh_ms` of the record is then start (or restore) to first SSH command."""

    how: Literal["snapshot", "cold_boot"]
    snapshot_key: Sha256Hex | None
    shape: SnapshotShapeRecord | None
    found: SnapshotFound | None
    make_ms: Millis | None
    cold_boot_reason: ColdBootReason | None

    @model_validator(mode="after")
    def _one_story(self) -> GuestStart:
        restored = (self.snapshot_key, self.shape, self.found)
        if self.how == "snapshot":
            if None in restored or self.cold_boot_reason is not None:
                raise ValueError("a restored guest names its snapshot and nothing else")
            if (self.found == "present") != (self.make_ms is None):
                raise ValueError("a snapshot is timed exactly when this trial made it")
        elif self.cold_boot_reason is None or restored != (None, None, None):
            raise ValueError("a cold boot names its reason and no snapshot")
        elif self.make_ms is not None and self.cold_boot_reason != "snapshot_failed":
            raise ValueError("only a failed making is timed on a cold boot")
        return self


QemuStop = Literal["already_exited", "qmp_quit", "sigkill"]
"""What the harness had done when it reaped the guest's QEMU (host/vm/qemu.py): nothing
(`already_exited`: QEMU had ended before the harness stopped it: the guest powered off,
QEMU failed, or something else killed it), sent QMP `quit` and saw it exit within the
quit deadline (`qmp_quit`), or sent SIGKILL (`sigkill`: `quit` could not be sent or was
not obeyed in time)."""


class QemuEnd(Part):
    """How the guest's QEMU process ended, as the harness's own `waitpid` read it when it
    reaped that process: its exit status, or the signal that ended it (exactly one), and
    `stop`, what the harness had done by then. An exit status after `sigkill`, or a
    signal after `qmp_quit`, is not a contradiction: QEMU can end by itself in the moment
    between the harness's last look and its signal."""

    stop: QemuStop
    exit_code: Annotated[int, Field(ge=0, le=255)] | None
    signal: Annotated[int, Field(ge=1, le=64)] | None

    @model_validator(mode="after")
    def _one_end(self) -> QemuEnd:
        if (self.exit_code is None) == (self.signal is None):
            raise ValueError("a process ends with exactly one of an exit status and a signal")
        return self

    @classmethod
    def of_returncode(cls, stop: QemuStop, returncode: int) -> QemuEnd:
        """From `subprocess.Popen.returncode`: negative is the signal that ended it."""
        if returncode < 0:
            return cls(stop=stop, exit_code=None, signal=-returncode)
        return cls(stop=stop, exit_code=returncode, signal=None)


class _GuestVmV1(Record):
    """What is recorded of one guest; each guest's record kind has its own schema id, so
    one guest's record can never be read as another's."""

    category: VmCategoryV1
    backend: Backend
    accelerator: Accelerator | None
    """None when the stage failed before the probe chose one."""
    accelerator_reason: AcceleratorReason | None
    guest_memory_bytes: ByteCount
    vcpus: Count
    memory_limit_bytes: ByteCount | None
    """The QEMU cgroup's memory limit as read back after writing it."""
    swap_limit_bytes: ByteCount | None
    """The swap limit as read back (0 means no swap)."""
    cpu_quota_millicores: Count | None
    pids_limit: Count | None
    peak_memory_bytes: ByteCount | None
    oom_kills: Count | None
    """OOM kills in the VM's cgroup; None when it could not be read (never guessed as 0)."""
    host_key_sha256: Sha256Hex | None
    """SHA-256 of the pinned ephemeral host public key."""
    boot_to_ssh_ms: Millis | None
    duration_ms: Millis


class _GuestVm(_GuestVmV1):
    category: VmCategory  # type: ignore[assignment]  # the /2 vocabulary extends /1's
    start: GuestStart | None
    """How the guest started; None when the stage failed before that was decided."""


class _GuestVmV3(_GuestVm):
    qemu_end: QemuEnd | None
    """How the guest's QEMU ended, read when the harness reaped it: the record is completed
    after the guest's QEMU was stopped (harness/trial/pipeline.py), whatever the order in
    which its other fields were read. None, never guessed, when no QEMU was started, when
    its end was not the harness's to read (the libvirt backend: QEMU is libvirtd's child,
    and libvirt does not tell its exit status), or when it was still present after the
    kill deadline (its `qemu_process` cleanup receipt then says `still_present`)."""

    def ended(self, qemu_end: QemuEnd | None) -> Self:
        """The same record, completed with how its QEMU ended (validated again whole)."""
        fields = self.model_dump(by_alias=True)
        fields["qemu_end"] = None if qemu_end is None else qemu_end.model_dump()
        return self.model_validate(fields)


class VmRecord(_GuestVmV3):
    """The agent's guest: where the agent, its tools and (placement `guest`) the worker ran."""

    schema_: Literal["harness.receipt.vm/3"] = Field("harness.receipt.vm/3", alias="schema")


VerifierPrepared = Literal["beside_agent", "after_agent"]
"""When the verification guest was started (harness/trial/verifierprep.py): beside the
agent's guest, as soon as that was up, because the host's memory held both even if the
agent's QEMU and the host worker grew to their cgroup limits, and the host had a core
for every harness guest with it; or after the agent's guest was released (memory or
cores did not allow both, or could not be read; or the libvirt backend, where a trial's
guests share one domain name)."""


class VerifierVmRecord(_GuestVmV3):
    """The verification guest: started from the same pristine image (booted, or restored
    from a snapshot of it), holding only the task and runtime from the host on its disk
    and, once the agent's guest was released, the carried workspace."""

    schema_: Literal["harness.receipt.verifier_vm/4"] = Field(
        "harness.receipt.verifier_vm/4", alias="schema"
    )
    prepared: VerifierPrepared

    @classmethod
    def of(cls, record: VmRecord, prepared: VerifierPrepared) -> VerifierVmRecord:
        """The same readings, under this kind's schema."""
        fields = record.model_dump(by_alias=True)
        fields["schema"] = cls.schema_id()
        fields["prepared"] = prepared
        return cls.model_validate(fields)
