"""Host admission before anything is acquired: memory floor, disk floor, accelerator."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import ByteCount, Millis, Probe
from receipts.vocabulary import Accelerator

PreflightCategory = Literal[
    "ok",
    "memory_below_floor",
    "memory_unread",
    "disk_below_floor",
    "disk_unread",
    "accelerator_unavailable",
    "cgroups_unavailable",
    "loopback_unavailable",
]

AcceleratorReason = Literal[
    "forced_by_flag",
    "probe_booted",
    "probe_failed",
    "probe_timeout",
    "kvm_device_absent",
    "kvm_device_unread",
]


class PreflightRecord(Record):
    schema_: Literal["harness.receipt.preflight/1"] = Field(
        "harness.receipt.preflight/1", alias="schema"
    )
    category: PreflightCategory
    mem_available_bytes: ByteCount | None
    memory_floor_bytes: ByteCount
    disk_free_bytes: ByteCount | None
    disk_floor_bytes: ByteCount
    kvm_device: Probe
    accelerator: Accelerator | None
    accelerator_reason: AcceleratorReason | None
    cgroup_version: Literal["v1", "v2"] | None
    duration_ms: Millis
