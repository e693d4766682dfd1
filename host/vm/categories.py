"""Closed vocabularies of the VM stage.

`VmFailure` is the non-`ok` part of `receipts.records.vm.VmCategory` that this
mechanism can decide by itself (budget categories such as `oom_killed` are decided
by the cgroup's owner). `Accelerator` and the probe reasons are the record's own
types, imported so they cannot drift.
"""

from typing import Literal

from receipts.records.preflight import AcceleratorReason
from receipts.vocabulary import Accelerator, AccelRequest

VmFailure = Literal[
    "cgroup_apply_failed",
    "qemu_start_failed",
    "qemu_exited",
    "boot_timeout",
    "ssh_timeout",
    "ssh_dropped",
    "host_key_mismatch",
    "control_failed",
]

StopMethod = Literal["qmp_quit", "sigkill", "libvirt_destroy", "already_exited", "not_started"]
"""How the QEMU process ended (for logs and benchmarks; the receipt has the evidence)."""

__all__ = ["AccelRequest", "Accelerator", "AcceleratorReason", "StopMethod", "VmFailure"]
