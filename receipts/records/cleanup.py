"""Cleanup receipts: one per owned resource, with the reading that proves its release."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import Index, Millis

Resource = Literal[
    "scratch_dir",
    "ssh_keys",
    "cgroup",
    "overlay_disk",
    "data_disk",
    "qemu_process",
    "libvirt_domain",
    "forwarded_port",
    "worker_process",
    "worker_socket",
    "worker_channel",
    "process_group",
    "trial_scratch",
]
"""`trial_scratch`: the trial's own scratch directory on the host (the worker's socket and
records, the read-only disks' trees, the carried workspace); `scratch_dir` is a guest's."""

CleanupStatus = Literal["confirmed", "failed", "not_acquired"]

Evidence = Literal[
    "process_reaped",
    "process_gone",
    "cgroup_removed",
    "cgroup_empty_and_removed",
    "file_absent",
    "directory_absent",
    "port_refusing",
    "domain_absent",
    "nothing_to_release",
    "still_present",
    "unread",
]


class CleanupRecord(Record):
    schema_: Literal["harness.receipt.cleanup/1"] = Field(
        "harness.receipt.cleanup/1", alias="schema"
    )
    index: Index
    resource: Resource
    status: CleanupStatus
    evidence: Evidence
    released_by: Literal["trial", "gc"]
    duration_ms: Millis
