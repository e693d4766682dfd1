"""The trial record: what was asked for, where it ran, and the verdict it claims.

The claimed verdict is re-derived by the audit from the other records; a claim that
does not match the evidence makes the receipt invalid.
"""

from __future__ import annotations

from typing import Literal, Self, get_args

from pydantic import Field, model_validator

from receipts.records.base import Record
from receipts.types import Identifier, TrialId, UnixMillis, Version
from receipts.vocabulary import AccelRequest, Backend, Channel, Placement

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

STAGE_ORDER: tuple[Stage, ...] = get_args(Stage)
"""The stages in the order they run: the Literal's own order, so a new stage is placed once."""

VerdictV1 = Literal[
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
"""The verdicts a `trial/1` record could claim: every one but `cancelled` (that harness
had none; receipts/records/legacy.py)."""

VerdictV3 = Literal[VerdictV1, "cancelled"]
"""The verdicts a `trial/2` or `trial/3` record could claim (receipts/records/legacy.py)."""

Verdict = Literal[VerdictV3, "accepted_unguarded"]
"""Every verdict a trial can end with. Derived from the records, never set by hand.
`accepted_unguarded`: every hidden test passed, but they ran inside the solution's own
process (a task judged `in_process`), where the solution's code could have written that
pass itself (docs/verification.md). It is never `accepted`."""

CancelSignal = Literal["SIGINT", "SIGTERM"]
"""The stop signals that cancel a trial (Ctrl-C, GitHub Actions' cancel; Slurm's scancel
and time limit, systemd, `kill`)."""

PolicyV1 = Literal["model", "scripted"]
"""The policies a `trial/1` or `agent/1` record could name (no forced tool calls then)."""

Policy = Literal[PolicyV1, "model_tool_required"]
"""Who chose the tool calls: the model through the worker, or a fixed script.
`model_tool_required`: the model, asked with `tool_choice: "required"`, so the worker's
grammar let it answer only with a tool call (every turn is a call the model chose; it
could not answer in text). A profile's `agent.tool_choice` selects it."""


class TrialFields(Record):
    """The fields of `trial/2` and `trial/3` (they differ only in what the version
    promises about the cleanup receipts, see :class:`TrialRecord`)."""

    trial_id: TrialId
    harness_version: Version
    profile: Identifier
    task: Identifier
    policy: Policy
    backend: Backend
    accel_requested: AccelRequest
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
    cancelled_stage: Stage | None
    """The stage that was running when a stop signal (`cancel_signal`) cancelled the
    trial; None when none did. Like `internal_error_stage`, its record and every later
    stage's are absent (what they did is void), every earlier stage's record is present
    and succeeded, and the verdict is `cancelled`. Teardown and host state are recorded
    as for any trial. A signal that arrives after the last stage ended cancels nothing:
    the trial's evidence is complete and it keeps its verdict."""
    cancel_signal: CancelSignal | None
    """The signal that cancelled the trial; set exactly when `cancelled_stage` is."""
    verdict: Verdict
    """Each older version narrows it to the verdicts it had."""

    @model_validator(mode="after")
    def _one_ending(self) -> Self:
        if (self.cancelled_stage is None) != (self.cancel_signal is None):
            raise ValueError("cancelled_stage and cancel_signal go together")
        if self.cancelled_stage is not None and self.internal_error_stage is not None:
            raise ValueError("a trial is cancelled or fails internally, not both")
        return self


class TrialRecord(TrialFields):
    """`trial/4`: the fields of `/3` and its promise (a trial's first act is making its
    scratch directory on the host, and the writer always releases it with a
    `trial_scratch` cleanup receipt: receipts/cleanupset.py requires one), and one more
    verdict: `accepted_unguarded`, for a pass the split judge did not guard. Its
    verification record is `verification/4` (the audit checks the two agree)."""

    schema_: Literal["harness.receipt.trial/4"] = Field("harness.receipt.trial/4", alias="schema")
