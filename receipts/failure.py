"""Why a trial failed, read from its records: the failed stage, its closed category, and
(for what an operator can fix on the host) which remedy applies.

Why here: `harness trial` and `harness audit` must say the same thing, and both read it
from the records (the trial from the receipt it just wrote), never from the run's
memory. The walk is the verdict's own (receipts.verdict): the first required stage in
which the harness failed (`internal_error`), whose record is missing
(`record_missing`), or whose record reports failure (its category). A verdict decided
after the stages (teardown, host state, OOM, the hidden tests) has no failed stage.

Remedies are closed ids; the command each names lives with the CLI
(harness/remedies.py). Only failures a host operator can fix get one: a missing pin,
a memory or disk floor, an accelerator, the cgroup controller, a dirty checkout, a
consumed ticket. A failure of the thing under test never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from receipts.records.agent import AgentCategory
from receipts.records.dispatch import DispatchCategory
from receipts.records.gate import GateCategory
from receipts.records.image import ImageCategory
from receipts.records.model import ModelCategory
from receipts.records.preflight import PreflightCategory
from receipts.records.source import SourceCategory
from receipts.records.trial import Stage
from receipts.records.verification import VerificationCategory
from receipts.records.vm import VmCategory
from receipts.records.worker import WorkerCategory
from receipts.recordset import RecordSet
from receipts.verdict import required_stages, stage_succeeded

FailureCategory = (
    Literal["internal_error", "record_missing"]
    | PreflightCategory
    | SourceCategory
    | DispatchCategory
    | ModelCategory
    | ImageCategory
    | VmCategory
    | GateCategory
    | WorkerCategory
    | AgentCategory
    | VerificationCategory
)
"""A failed stage's closed category, or why it has none (`internal_error`,
`record_missing`)."""

Remedy = Literal[
    "model_pin",
    "model_prepare",
    "free_memory",
    "free_disk",
    "accel_tcg",
    "cgroup_controller",
    "clean_checkout",
    "new_ticket",
    "fill_cache",
    "loopback_up",
]
"""What an operator can do on the host: see harness/remedies.py for each command."""

_REMEDIES: dict[tuple[Stage, str], Remedy] = {
    ("model", "pins_missing"): "model_pin",
    ("model", "source_unreadable"): "model_prepare",
    ("preflight", "memory_below_floor"): "free_memory",
    ("preflight", "disk_below_floor"): "free_disk",
    ("preflight", "accelerator_unavailable"): "accel_tcg",
    ("preflight", "cgroups_unavailable"): "cgroup_controller",
    ("preflight", "loopback_unavailable"): "loopback_up",
    ("image", "disk_full"): "free_disk",
    ("worker", "model_load_out_of_memory"): "free_memory",
    ("source", "dirty_refused"): "clean_checkout",
    ("dispatch", "dirty_tree"): "clean_checkout",
    ("dispatch", "already_consumed"): "new_ticket",
    ("image", "fetch_failed"): "fill_cache",
    ("vm", "runtime_fetch_failed"): "fill_cache",
    ("model", "source_fetch_failed"): "fill_cache",
}


@dataclass(frozen=True)
class FailureReason:
    stage: Stage
    category: FailureCategory
    remedy: Remedy | None


def failure_reason(records: RecordSet) -> FailureReason | None:
    """The first failed required stage and its category; None when every stage passed."""
    trial = records.trial
    if trial is None:
        return None
    for stage in required_stages(trial):
        category: FailureCategory
        if stage == trial.internal_error_stage:
            category = "internal_error"
        else:
            record = records.stage_record(stage)
            if record is None:
                category = "record_missing"
            elif stage_succeeded(record):
                continue
            else:
                category = getattr(record, "category")  # noqa: B009 - every stage record has one
        return FailureReason(stage, category, _REMEDIES.get((stage, category)))
    return None
