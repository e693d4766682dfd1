"""Records are closed: frozen, extra fields refused, strict types, bounded, versioned."""

from __future__ import annotations

import dataclasses
import typing

import pydantic
import pytest

from receipts.records import CleanupRecord, ToolCallRecord, VmRecord
from receipts.records.base import Part, Record
from receipts.records.hostreading import HOST_READINGS
from receipts.recordset import KINDS, RecordSet, classify_entry
from tests.receipts.builders import accepted_model_trial, replace


def _vm() -> VmRecord:
    vm = accepted_model_trial().vm
    assert isinstance(vm, VmRecord)
    return vm


def test_extra_field_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"extra_forbidden|Extra inputs"):
        replace(_vm(), stderr="boom")


def test_records_are_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        setattr(_vm(), "oom_kills", 3)  # noqa: B010 (bypasses mypy's frozen check on purpose)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("oom_kills", "0"),
        ("oom_kills", 0.0),
        ("oom_kills", True),
        ("oom_kills", -1),
        ("oom_kills", 10**12),
        ("category", "something_else"),
        ("host_key_sha256", "A" * 64),
        ("host_key_sha256", "a" * 63),
    ],
)
def test_strict_bounded_closed_fields(field: str, value: object) -> None:
    with pytest.raises(pydantic.ValidationError):
        replace(_vm(), **{field: value})


def test_schema_field_must_name_the_record_kind() -> None:
    data = _vm().to_json()
    data["schema"] = "harness.receipt.gate/1"
    with pytest.raises(pydantic.ValidationError):
        VmRecord.model_validate(data)


def test_every_kind_names_a_versioned_schema_of_its_own() -> None:
    ids = [kind.model.schema_id() for kind in KINDS]
    assert len(set(ids)) == len(ids)
    for kind, schema_id in zip(KINDS, ids, strict=True):
        name, _, version = schema_id.partition("/")
        assert version in {"1", "2", "3", "4"}  # trial/4, verification/4: unguarded passes
        assert name == f"harness.receipt.{kind.name.removesuffix('s')}" or schema_id in {
            "harness.receipt.worker_request/2",
            "harness.receipt.agent_turn/1",
            "harness.receipt.tool_call/1",
            "harness.receipt.cleanup/1",
        }


def test_older_versions_are_older_versions_of_the_same_kind() -> None:
    """A legacy model reads an earlier version of its own kind's entry, never another kind's,
    never the current version, and never one that another version already claims."""
    every = [model.schema_id() for kind in KINDS for model in kind.models()]
    assert len(set(every)) == len(every)
    legacy = [(kind, model) for kind in KINDS for model in kind.legacy]
    assert [model.schema_id() for _kind, model in legacy] == [
        "harness.receipt.trial/3",
        "harness.receipt.trial/2",
        "harness.receipt.trial/1",
        "harness.receipt.dispatch/1",
        "harness.receipt.model/1",
        "harness.receipt.vm/2",
        "harness.receipt.vm/1",
        "harness.receipt.verifier_vm/3",
        "harness.receipt.verifier_vm/2",
        "harness.receipt.verifier_vm/1",
        "harness.receipt.worker/1",
        "harness.receipt.agent/2",
        "harness.receipt.agent/1",
        "harness.receipt.verification/3",
        "harness.receipt.verification/2",
        "harness.receipt.verification/1",
        "harness.receipt.hoststate/2",
        "harness.receipt.hoststate/1",
        "harness.receipt.memory/1",
        "harness.receipt.worker_request/2",
        "harness.receipt.worker_request/1",
        "harness.receipt.tool_call/3",
        "harness.receipt.tool_call/2",
        "harness.receipt.tool_call/1",
    ]
    for kind, model in legacy:
        name, _, version = model.schema_id().partition("/")
        current_name, _, current_version = kind.model.schema_id().partition("/")
        assert name == current_name
        assert int(version) < int(current_version)


def test_a_kind_picks_its_model_by_exact_schema_id() -> None:
    from receipts.records import HostStateRecord, VmRecord
    from receipts.records.legacy import (
        HostStateRecordV1,
        HostStateRecordV2,
        VmRecordV1,
        VmRecordV2,
    )
    from receipts.recordset import KIND_BY_NAME

    hoststate, vm = KIND_BY_NAME["hoststate"], KIND_BY_NAME["vm"]
    assert hoststate.model_for("harness.receipt.hoststate/3") is HostStateRecord
    assert hoststate.model_for("harness.receipt.hoststate/2") is HostStateRecordV2
    assert hoststate.model_for("harness.receipt.hoststate/1") is HostStateRecordV1
    assert vm.model_for("harness.receipt.vm/3") is VmRecord
    assert vm.model_for("harness.receipt.vm/2") is VmRecordV2
    assert vm.model_for("harness.receipt.vm/1") is VmRecordV1
    for other in ("harness.receipt.hoststate/4", "harness.receipt.vm/1", None, 2, ["x"]):
        assert hoststate.model_for(other) is None
    assert vm.model_for("harness.receipt.hoststate/1") is None


def _string_annotations(model: type[pydantic.BaseModel]) -> list[str]:
    """Fields typed as plain `str` without a pattern: free text a record must not have."""
    free = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        args = typing.get_args(annotation) or (annotation,)
        for arg in args:
            if arg is str and not any(
                isinstance(m, pydantic.StringConstraints | typing.Any)
                and getattr(m, "pattern", None)
                for m in info.metadata
            ):
                free.append(f"{model.__name__}.{name}")
            if isinstance(arg, type) and issubclass(arg, Part):
                free.extend(_string_annotations(arg))
    return free


def test_no_free_text_field_anywhere() -> None:
    offenders = []
    for kind in KINDS:
        for model in kind.models():
            offenders.extend(_string_annotations(model))
    assert offenders == []


def test_no_float_fields_anywhere() -> None:
    """Counts and durations are integers: floats would invite NaN and rounding disputes."""
    for model in (model for kind in KINDS for model in kind.models()):
        for name, info in model.model_fields.items():
            assert float not in (typing.get_args(info.annotation) or (info.annotation,)), name


def test_entry_names_round_trip() -> None:
    assert classify_entry("cleanup/000003.json") == (KINDS[-1], 3)
    assert classify_entry("cleanup.json") is None
    assert classify_entry("trial/000000.json") is None
    assert classify_entry("trial.json") == (KINDS[0], None)
    assert {f for f in RecordSet.__dataclass_fields__} == {k.name for k in KINDS}


def test_cleanup_record_carries_no_identifier_of_the_host() -> None:
    fields = set(CleanupRecord.model_fields)
    assert not fields & {"path", "name", "pid", "message", "detail"}


def test_record_base_is_strict_and_closed() -> None:
    assert Record.model_config.get("extra") == "forbid"
    assert Record.model_config.get("frozen") is True
    assert Record.model_config.get("strict") is True


@pytest.mark.parametrize(
    "changes",
    [
        {"task_sha256": None},
        {"final_diff_sha256": None},
        {"category": "records_invalid", "result": "failed"},
        {
            "category": "records_invalid",
            "result": "passed",
            "task_sha256": None,
            "final_diff_sha256": None,
        },
    ],
)
def test_verification_digests_are_absent_exactly_in_the_unread_stand_in(
    changes: dict[str, object],
) -> None:
    """A verification without a task digest could otherwise pass; one that says it was not
    read must not carry digests, nor pass."""
    verification = accepted_model_trial().verification
    assert verification is not None
    with pytest.raises(pydantic.ValidationError):
        replace(verification, **changes)
    stand_in = replace(
        verification,
        category="records_invalid",
        result="failed",
        task_sha256=None,
        final_diff_sha256=None,
        workspace_sha256=None,
        judge="not_run",
    )
    assert stand_in.task_sha256 is None  # the positive control: the stand-in itself is valid


def _with_exclusions(facet: str, before: int, after: int, tags: tuple[str, ...]) -> object:
    from receipts.records import HostStateRecord

    record = accepted_model_trial().hoststate
    assert record is not None
    data = record.model_dump(by_alias=True)
    data[facet] = {**data[facet], "excluded_before": before, "excluded_after": after}
    data["excluded_trials"] = tags
    return HostStateRecord.model_validate(data)


def test_host_state_exclusions_name_their_trials() -> None:
    other = "0123456789abcdef"
    record = _with_exclusions("cgroups", 0, 2, (other,))
    assert record is not None
    _with_exclusions("listening_sockets", 1, 0, (other, "fedcba9876543210"))


@pytest.mark.parametrize(
    ("facet", "before", "after", "tags"),
    [
        ("cgroups", 0, 1, ()),  # excluded, but no trial named
        ("cgroups", 0, 0, ("0123456789abcdef",)),  # a trial named, nothing excluded
        ("routes", 1, 0, ("0123456789abcdef",)),  # routes are never excluded
        ("firewall", 0, 1, ("0123456789abcdef",)),
        ("resolver", 0, 1, ("0123456789abcdef",)),
        ("cgroups", 0, 1, ("fedcba9876543210", "0123456789abcdef")),  # unsorted
        ("cgroups", 0, 1, ("0123456789abcdef", "0123456789abcdef")),  # duplicate
        ("cgroups", 0, 1, ("not-a-tag",)),
    ],
)
def test_host_state_exclusions_must_be_accounted(
    facet: str, before: int, after: int, tags: tuple[str, ...]
) -> None:
    with pytest.raises(pydantic.ValidationError):
        _with_exclusions(facet, before, after, tags)


def _with_unrelated(facet: str, before: int, after: int) -> object:
    from receipts.records import HostStateRecord

    record = accepted_model_trial().hoststate
    assert record is not None
    data = record.model_dump(by_alias=True)
    data[facet] = {**data[facet], "unrelated_before": before, "unrelated_after": after}
    return HostStateRecord.model_validate(data)


@pytest.mark.parametrize("facet", ["cgroups", "listening_sockets"])
def test_items_of_no_trial_are_counted_without_naming_a_trial(facet: str) -> None:
    assert _with_unrelated(facet, 3, 5) is not None


@pytest.mark.parametrize("facet", ["routes", "resolver", "firewall"])
def test_routes_resolver_and_firewall_never_leave_out_items_of_no_trial(facet: str) -> None:
    """Routes, resolver and firewall stay strict: no count of unrelated items is valid
    there. Mutation control: the validator's check of unrelated counts removed."""
    with pytest.raises(pydantic.ValidationError):
        _with_unrelated(facet, 0, 1)


@pytest.mark.parametrize("reading", sorted(HOST_READINGS))
def test_every_host_reading_is_a_verification_stand_in_without_digests(reading: str) -> None:
    """Every host reading of the verifier (its file refused, or its command ended without
    one) is a record that was not read: no digests, never passed. Mutation control: the
    check back to `records_invalid` only refuses the stand-ins of the four command
    failures (their absent digests)."""
    verification = accepted_model_trial().verification
    assert verification is not None
    unread = {"category": reading, "result": "failed", "task_sha256": None}
    unread["judge"] = "not_run"
    stand_in = replace(verification, **unread, final_diff_sha256=None, workspace_sha256=None)
    assert stand_in.category == reading
    with pytest.raises(pydantic.ValidationError):
        replace(
            verification,
            **{**unread, "result": "passed"},
            final_diff_sha256=None,
            workspace_sha256=None,
        )
    with pytest.raises(pydantic.ValidationError):
        replace(verification, category=reading, result="failed")  # digests kept


def test_a_record_is_read_by_its_documented_names_only() -> None:
    """A record's JSON names its schema `schema` (the documented name); the Python
    name `schema_` is an unknown field there, refused, so one record has one spelling
    and one canonical form."""
    data = _vm().model_dump(by_alias=True)
    data["schema_"] = data.pop("schema")
    with pytest.raises(pydantic.ValidationError):
        VmRecord.model_validate(data)


def test_a_refused_record_s_error_does_not_echo_its_input() -> None:
    """Validation errors reach logs and the audit's messages: a hostile value (here a
    terminal escape) is named by its field, never repeated."""
    data = _vm().model_dump(by_alias=True)
    hostile = "\x1b]0;owned\x07" + "A" * 40
    data["schema"] = hostile
    with pytest.raises(pydantic.ValidationError) as info:
        VmRecord.model_validate(data)
    assert "schema" in str(info.value)
    assert "owned" not in str(info.value) and "AAAA" not in str(info.value)


def _tool_call(**changes: object) -> ToolCallRecord:
    record = accepted_model_trial().tool_calls[0]
    return typing.cast(ToolCallRecord, replace(record, **changes))


def test_only_a_run_tests_that_ran_has_a_cgroup_end() -> None:
    """`cgroup_end` is there exactly for a `run_tests` that ran (has a `run_exit`): a
    `read` claiming a run's exit and a cgroup end is refused, as is a run without one."""
    ran = _tool_call(tool="run_tests", run_exit="failed", cgroup_end="emptied", edit_match=None)
    assert ran.cgroup_end == "emptied"
    for changes in (
        {"tool": "read", "run_exit": "failed", "cgroup_end": "emptied", "edit_match": None},
        {"tool": "run_tests", "run_exit": None, "cgroup_end": "emptied", "edit_match": None},
        {"tool": "run_tests", "run_exit": "failed", "cgroup_end": None, "edit_match": None},
    ):
        with pytest.raises(pydantic.ValidationError):
            _tool_call(**changes)


@pytest.mark.parametrize(
    ("processes_left", "agent_cgroup"), [(None, "emptied"), (0, "unread"), (0, "emptied")]
)
def test_a_host_reading_of_the_agent_read_nothing_of_its_confinement(
    processes_left: int | None, agent_cgroup: str
) -> None:
    """A host reading (the guest's record could not be read) cannot carry a process
    count or a cgroup end: either one alone is refused."""
    agent = accepted_model_trial().agent
    assert agent is not None
    reading = sorted(HOST_READINGS)[0]
    assert replace(agent, category=reading, processes_left=None, agent_cgroup="unread")
    with pytest.raises(pydantic.ValidationError):
        replace(agent, category=reading, processes_left=processes_left, agent_cgroup=agent_cgroup)


@pytest.mark.parametrize(
    "changes",
    [
        {"report_ids": "mismatch"},  # every expected test passed, but the IDs differ
        {"report_ids": "unread"},
        {"tests_passed": 2, "tests_failed": 1},  # the IDs match, one test failed
    ],
)
def test_a_pass_needs_the_expected_ids_and_every_one_passed(changes: dict[str, object]) -> None:
    """`passed` needs both: the report names exactly the task's hidden tests, and all of
    them passed. Either alone is refused (the same record `failed` is valid)."""
    verification = accepted_model_trial().verification
    assert verification is not None and verification.result == "passed"
    with pytest.raises(pydantic.ValidationError):
        replace(verification, **changes)
    assert replace(verification, **changes, result="failed").result == "failed"


def test_a_record_dumped_any_way_names_its_schema_schema() -> None:
    """Whatever dumps a record (a log line, a report, pydantic's own JSON), its fields
    carry their documented names: `schema`, never the Python name."""
    vm = _vm()
    assert "schema" in vm.model_dump() and "schema_" not in vm.model_dump()
    assert '"schema"' in vm.model_dump_json()


@pytest.mark.parametrize(
    ("processes_left", "agent_cgroup"), [(1, "emptied"), (0, "not_emptied"), (None, "unread")]
)
def test_anything_left_of_the_agent_is_a_confinement_breach(
    processes_left: int | None, agent_cgroup: str
) -> None:
    """A process left, or a cgroup not emptied, is `confinement_breached`: the record
    cannot say `finished`, and saying the breach is valid."""
    agent = accepted_model_trial().agent
    assert agent is not None and agent.category == "finished"
    left = {"processes_left": processes_left, "agent_cgroup": agent_cgroup}
    with pytest.raises(pydantic.ValidationError):
        replace(agent, **left)
    assert replace(agent, **left, category="confinement_breached").processes_left == processes_left


def test_the_table_of_kinds_cannot_be_changed() -> None:
    """The audit reads every entry through KINDS: no caller can swap a kind's model or
    add a legacy version at run time."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        KINDS[0].legacy = (VmRecord,)  # type: ignore[misc]


def test_a_record_set_cannot_be_changed_after_it_is_made() -> None:
    """What the bundle writer and the audit hold is the set as made: a stage's record
    cannot be swapped in place afterwards."""
    records = accepted_model_trial()
    with pytest.raises(dataclasses.FrozenInstanceError):
        records.vm = None  # type: ignore[misc]


def test_file_not_read_is_a_tool_call_3_outcome_only() -> None:
    """An older tool call version cannot carry the refusal its harness never made."""
    from receipts.records.legacy import ToolCallRecordV1, ToolCallRecordV2

    current = accepted_model_trial().tool_calls[0].model_dump(by_alias=True)
    refused = {**current, "outcome": "file_not_read", "edit_match": None}
    assert ToolCallRecord.model_validate(refused).outcome == "file_not_read"
    older = {**refused, "schema": "harness.receipt.tool_call/2"}
    with pytest.raises(pydantic.ValidationError):
        ToolCallRecordV2.model_validate(older)
    assert ToolCallRecordV2.model_validate({**older, "outcome": "ok"}).outcome == "ok"
    oldest = {k: v for k, v in older.items() if k != "cgroup_end"}
    with pytest.raises(pydantic.ValidationError):
        ToolCallRecordV1.model_validate({**oldest, "schema": "harness.receipt.tool_call/1"})
