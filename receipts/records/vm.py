"""The VM: backend, accelerator and why, budgets as read back, and how it ended."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.records.preflight import AcceleratorReason
from receipts.types import ByteCount, Count, Millis, Sha256Hex

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
]


class VmRecord(Record):
    schema_: Literal["harness.receipt.vm/1"] = Field("harness.receipt.vm/1", alias="schema")
    category: VmCategory
    backend: Literal["qemu", "libvirt"]
    accelerator: Literal["kvm", "tcg"] | None
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
