"""The VM: backend, accelerator and why, budgets as read back, and how it ended."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.records.preflight import AcceleratorReason
from receipts.types import ByteCount, Count, Millis, Sha256Hex
from receipts.vocabulary import Accelerator, Backend

VmCategory = Literal[
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
"""The `runtime_*` categories: the guest runtime for the read-only disk (our guest code
and its pinned wheels, host/runtime.py) could not be had before QEMU started:
`runtime_fetch_failed` when it needed the network and could not reach it.
`data_disk_failed`: the read-only disk (its tree or its ext4 image) could not be written
on the host before QEMU started (disk full, permissions)."""


class _GuestVm(Record):
    """What is recorded of one guest; each guest's record kind has its own schema id, so
    one guest's record can never be read as another's."""

    category: VmCategory
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


class VmRecord(_GuestVm):
    """The agent's guest: where the agent, its tools and (placement `guest`) the worker ran."""

    schema_: Literal["harness.receipt.vm/1"] = Field("harness.receipt.vm/1", alias="schema")


class VerifierVmRecord(_GuestVm):
    """The verification guest: booted from the same pristine image after the agent's guest
    was released, holding only the carried workspace and the task from the host."""

    schema_: Literal["harness.receipt.verifier_vm/1"] = Field(
        "harness.receipt.verifier_vm/1", alias="schema"
    )

    @classmethod
    def of(cls, record: VmRecord) -> VerifierVmRecord:
        """The same readings, under this kind's schema."""
        fields = record.model_dump(by_alias=True)
        fields["schema"] = cls.schema_id()
        return cls.model_validate(fields)
