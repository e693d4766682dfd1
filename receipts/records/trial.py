"""The trial record: what was asked for, where it ran, and the verdict it claims.

The claimed verdict is re-derived by the audit from the other records; a claim that
does not match the evidence makes the receipt invalid.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import Identifier, TrialId, UnixMillis, Version

Stage = Literal[
    "preflight",
    "source",
    "dispatch",
    "model",
    "image",
    "vm",
    "gate",
    "worker",
    "agent",
    "verification",
]
"""Pipeline stages that write a stage record, in the order they run."""

STAGE_ORDER: tuple[Stage, ...] = (
    "preflight",
    "source",
    "dispatch",
    "model",
    "image",
    "vm",
    "gate",
    "worker",
    "agent",
    "verification",
)

Verdict = Literal[
    "accepted",
    "task_incomplete",
    "failed_preflight",
    "failed_source",
    "failed_dispatch",
    "failed_model",
    "failed_image",
    "failed_vm",
    "failed_gate",
    "failed_worker",
    "failed_agent",
    "failed_verification",
    "failed_teardown",
    "failed_host_state",
    "failed_oom",
    "failed_internal",
    "evidence_incomplete",
]
"""Every verdict a trial can end with. Derived from the records, never set by hand."""

Policy = Literal["model", "scripted"]
"""Who chose the tool calls: the model through the worker, or a fixed script."""

Placement = Literal["guest", "host", "none"]
"""Where the worker ran; `none` for scripted trials, which have no worker."""

Channel = Literal["guest_loopback", "guestfwd_unix", "virtio_serial", "none"]
"""How the agent reached the worker's API."""


class TrialRecord(Record):
    schema_: Literal["harness.receipt.trial/1"] = Field("harness.receipt.trial/1", alias="schema")
    trial_id: TrialId
    harness_version: Version
    profile: Identifier
    task: Identifier
    policy: Policy
    backend: Literal["qemu", "libvirt"]
    accel_requested: Literal["auto", "kvm", "tcg"]
    placement: Placement
    channel: Channel
    dispatched: bool
    started_unix_ms: UnixMillis
    ended_unix_ms: UnixMillis
    failed_stage: Stage | None
    internal_error_stage: Stage | None
    """The stage in which the harness itself failed unexpectedly (a defect of ours, not a
    category of the thing under test); None when it did not. Its record and every later
    stage's are absent, and the verdict is `failed_internal`: a claim that can only make
    the verdict worse, never hide a recorded failure before it."""
    verdict: Verdict
