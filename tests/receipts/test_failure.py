"""Why a trial failed, read from its records: the verdict's own walk over the stages."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from receipts.failure import _REMEDIES, FailureReason, failure_reason
from receipts.recordset import KIND_BY_NAME
from tests.receipts.builders import accepted_model_trial, accepted_scripted_trial, replace


def test_a_trial_whose_stages_all_passed_has_no_failed_stage() -> None:
    assert failure_reason(accepted_model_trial()) is None
    assert failure_reason(accepted_scripted_trial()) is None


def test_the_first_failed_stage_and_its_category_with_a_remedy() -> None:
    records = accepted_model_trial()
    assert records.preflight is not None and records.model is not None
    failed = dataclasses.replace(
        records,
        preflight=replace(records.preflight, category="disk_below_floor"),
        model=replace(records.model, category="conversion_failed"),
    )
    assert failure_reason(failed) == FailureReason("preflight", "disk_below_floor", "free_disk")
    model_only = dataclasses.replace(records, model=replace(records.model, category="pins_missing"))
    assert failure_reason(model_only) == FailureReason("model", "pins_missing", "model_pin")


def test_what_no_operator_can_fix_gets_no_remedy() -> None:
    records = accepted_model_trial()
    assert records.gate is not None
    tampered = dataclasses.replace(records, gate=replace(records.gate, category="digest_mismatch"))
    assert failure_reason(tampered) == FailureReason("gate", "digest_mismatch", None)


def test_a_missing_record_and_an_internal_error_are_named() -> None:
    records = accepted_model_trial()
    assert records.trial is not None
    missing = dataclasses.replace(records, image=None)
    assert failure_reason(missing) == FailureReason("image", "record_missing", None)
    crashed = dataclasses.replace(records, trial=replace(records.trial, internal_error_stage="vm"))
    assert failure_reason(crashed) == FailureReason("vm", "internal_error", None)


@pytest.mark.parametrize(("stage", "category"), sorted(_REMEDIES))
def test_every_remedy_answers_a_category_its_stage_can_record(stage: str, category: str) -> None:
    model = KIND_BY_NAME[stage].model
    annotation = model.model_fields["category"].annotation
    assert category in _literal_values(annotation)


def _literal_values(annotation: object) -> set[str]:
    args = get_args(annotation)
    if not args:
        return set()
    values = {a for a in args if isinstance(a, str)}
    for nested in args:
        values |= _literal_values(nested)
    return values


def test_a_failure_reason_cannot_be_changed() -> None:
    """The reason the CLI prints and the report shows is the one derived: immutable."""
    reason = FailureReason("preflight", "disk_below_floor", "free_disk")
    with pytest.raises(dataclasses.FrozenInstanceError):
        reason.remedy = None  # type: ignore[misc]
