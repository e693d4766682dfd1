"""What the guest writes, read on the host: strict JSON of the closed shape, or a closed
refusal (harness/trial/guestrecords.py). No VM: the inputs are the bytes the guest
writes (built from the receipt builders' records) and damaged copies of them.

Each damage below is one that plain `json.loads` + pydantic would have let through as
a different record (duplicate key: the last value wins; NaN) or turned into an uncaught
exception (not an object, missing part), so each case is the mutation control of the
check that refuses it.
"""

from __future__ import annotations

import dataclasses

import pytest

from harness.trial.guestrecords import (
    NO_REFUSALS,
    AgentOutput,
    GuestOutputInvalid,
    connection_refusals,
    read_request_lines,
    read_verification,
    unread_agent_record,
    unread_verification_record,
)
from harness.trial.guestrecords import read_agent_output as read_launched
from harness.version import HARNESS_VERSION
from receipts.agentclis import AgentIdentity
from receipts.canonical import canonical
from receipts.records.hostreading import HOST_READINGS
from receipts.recordset import RecordSet
from tests.harness.trial.guestfakes import agent_file
from tests.receipts.builders import accepted_model_trial

LOOP = AgentIdentity.harness_loop(HARNESS_VERSION)
"""What the host launched in these tests (the builders' agent record names it)."""


def read_agent_output(data: bytes) -> AgentOutput:
    return read_launched(data, LOOP)


def _records() -> RecordSet:
    return accepted_model_trial()


def _kind(read: object, data: bytes) -> str:
    with pytest.raises(GuestOutputInvalid) as info:
        read(data)  # type: ignore[operator]
    return info.value.kind


# ---- agent.json ---------------------------------------------------------------------------


def test_the_agent_file_as_written_is_read_whole() -> None:
    """The positive control: the bytes the guest writes come back as the same records."""
    records = _records()
    output = read_agent_output(agent_file(records))
    assert output.agent == records.agent
    assert output.turns == records.agent_turns and len(output.turns) == 2
    assert output.tool_calls == records.tool_calls


def test_agent_file_with_a_duplicate_key_is_refused() -> None:
    """`{"agent": A, ..., "agent": B}`: json.loads keeps B (here a record that claims
    success where A says the agent crashed)."""
    records = _records()
    assert records.agent is not None
    crashed = canonical(records.agent.model_copy(update={"category": "agent_crashed"}).to_json())
    data = agent_file(records)
    assert data.startswith(b'{"agent":')
    data = b'{"agent":' + crashed + b"," + data[1:]
    assert _kind(read_agent_output, data) == "duplicate_key"


def test_agent_file_with_nan_is_refused() -> None:
    data = agent_file(_records()).replace(b'"duration_ms":', b'"x":NaN,"duration_ms":', 1)
    assert b"NaN" in data
    assert _kind(read_agent_output, data) == "non_finite_number"


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"", "invalid_json"),
        (b'{"agent":', "invalid_json"),
        (b"\xff\xfe{}", "invalid_json"),
        (b"[]", "not_an_object"),
        (b"null", "not_an_object"),
        (b"{}", "schema_invalid"),
    ],
)
def test_agent_file_that_is_no_object_is_refused(data: bytes, kind: str) -> None:
    assert _kind(read_agent_output, data) == kind


@pytest.mark.parametrize("damage", ["extra_part", "missing_part", "turns_not_list", "calls_dict"])
def test_agent_file_of_another_shape_is_refused(damage: str) -> None:
    records = _records()
    assert records.agent is not None
    value: dict[str, object] = {
        "agent": records.agent.to_json(),
        "turns": [turn.to_json() for turn in records.agent_turns],
        "tool_calls": [call.to_json() for call in records.tool_calls],
    }
    if damage == "extra_part":
        value["stdout"] = "model text"
    elif damage == "missing_part":
        del value["tool_calls"]
    elif damage == "turns_not_list":
        value["turns"] = {"0": value["turns"]}
    else:
        value["tool_calls"] = {}
    assert _kind(read_agent_output, canonical(value)) == "schema_invalid"


def test_agent_file_with_a_record_outside_its_schema_is_refused() -> None:
    records = _records()
    data = agent_file(records).replace(b'"kind":"tool_call"', b'"kind":"tool_cal"', 1)
    assert data != agent_file(records)
    assert _kind(read_agent_output, data) == "schema_invalid"


@pytest.mark.parametrize("reading", sorted(HOST_READINGS))
def test_agent_file_claiming_the_hosts_own_reading_is_refused(reading: str) -> None:
    """The host readings (`records_invalid`, `exited_nonzero`, ...) are said only by the
    host; a guest saying one, with counts of its choosing, is not believed. Mutation
    control: the check back to `== "records_invalid"` lets the other four through."""
    records = _records()
    assert records.agent is not None
    claimed = records.agent.model_copy(update={"category": reading})
    data = agent_file(dataclasses.replace(records, agent=claimed))
    assert _kind(read_agent_output, data) == "schema_invalid"


@pytest.mark.parametrize(
    "named",
    [
        {"agent_version": "0.1.1"},
        {"agent": "opencode", "agent_version": "1.18.33", "agent_sha256": "0" * 64},
        {
            "agent": "opencode",
            "agent_version": AgentIdentity.cli("opencode").version,
            "agent_sha256": AgentIdentity.cli("opencode").sha256,
        },
    ],
)
def test_agent_file_naming_another_agent_than_launched_is_refused(
    named: dict[str, object],
) -> None:
    """Whose code ran is the host's to know: a record that names another version, or a
    pinned CLI the host did not launch, is not believed. Mutation control: without the
    identity comparison all three are read."""
    records = _records()
    assert records.agent is not None
    claimed = records.agent.model_copy(update=named)
    data = agent_file(dataclasses.replace(records, agent=claimed))
    assert _kind(read_agent_output, data) == "schema_invalid"


@pytest.mark.parametrize("reading", sorted(HOST_READINGS))
def test_unread_agent_record_names_the_failure_with_nothing_counted(reading: str) -> None:
    record = unread_agent_record("model", LOOP, reading)  # type: ignore[arg-type]
    assert record.category == reading and record.policy == "model"
    assert (record.turns, record.tool_calls, record.prompt_tokens_total) == (0, 0, 0)
    assert (record.agent, record.agent_version, record.agent_sha256) == (
        "harness_loop",
        HARNESS_VERSION,
        None,
    )
    assert unread_agent_record("scripted", LOOP).category == "records_invalid"
    cli = unread_agent_record("model", AgentIdentity.cli("opencode"))
    assert (cli.agent, cli.agent_sha256) == ("opencode", AgentIdentity.cli("opencode").sha256)


# ---- verification.json --------------------------------------------------------------------


def _verification_file() -> bytes:
    verification = _records().verification
    assert verification is not None
    return verification.canonical_bytes()


def test_the_verification_file_as_written_is_read() -> None:
    assert read_verification(_verification_file()) == _records().verification


def test_verification_file_with_a_duplicate_result_is_refused() -> None:
    """A failed run that appends `"result":"passed"`: json.loads keeps the pass."""
    data = _verification_file()
    failed = data.replace(b'"result":"passed"', b'"result":"failed"')
    assert failed != data
    assert _kind(read_verification, failed[:-1] + b',"result":"passed"}') == "duplicate_key"


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"", "invalid_json"),
        (b"[1]", "not_an_object"),
        (b'{"category":"ok"}', "schema_invalid"),
    ],
)
def test_verification_file_that_is_not_the_record_is_refused(data: bytes, kind: str) -> None:
    assert _kind(read_verification, data) == kind


def test_verification_file_with_an_overflowing_number_is_refused() -> None:
    data = _verification_file().replace(b'"duration_ms":', b'"duration_ms":1e999,"d":', 1)
    assert _kind(read_verification, data) == "non_finite_number"


@pytest.mark.parametrize("reading", sorted(HOST_READINGS))
def test_verification_file_claiming_the_hosts_own_reading_is_refused(reading: str) -> None:
    """Mutation control: the check back to `== "records_invalid"` lets the other four in."""
    data = unread_verification_record(reading).canonical_bytes()  # type: ignore[arg-type]
    assert _kind(read_verification, data) == "schema_invalid"


# ---- worker request records ---------------------------------------------------------------


def _request_lines() -> bytes:
    return b"".join(r.canonical_bytes() + b"\n" for r in _records().worker_requests)


def test_request_lines_as_written_are_read() -> None:
    requests = _records().worker_requests
    assert len(requests) >= 2
    assert read_request_lines(_request_lines() + b"\n\n") == requests


def test_one_bad_request_line_refuses_them_all() -> None:
    """A partial count never passes for a complete one: the whole file is refused."""
    lines = _request_lines().splitlines()
    truncated = b"\n".join([*lines[:-1], lines[-1][:-5]])
    assert _kind(read_request_lines, truncated) == "invalid_json"


def test_request_line_with_a_duplicate_key_is_refused() -> None:
    first, *rest = _request_lines().splitlines()
    assert b'"completion_tokens":' in first
    doubled = first.replace(b'"completion_tokens":', b'"completion_tokens":0,"completion_tokens":')
    data = b"\n".join([doubled, *rest])
    assert _kind(read_request_lines, data) == "duplicate_key"


def test_request_line_that_is_not_an_object_is_refused() -> None:
    assert _kind(read_request_lines, b"[]\n") == "not_an_object"
    assert _kind(read_request_lines, b'{"index":0}\n') == "schema_invalid"


def _refusal_line(refusal: str) -> bytes:
    return canonical({"schema": "harness.receipt.worker_connection/1", "refusal": refusal})


def test_connection_lines_are_counted_beside_the_request_records() -> None:
    requests = _records().worker_requests
    lines = _request_lines().splitlines()
    data = b"\n".join(
        [_refusal_line("over_limit"), lines[0], _refusal_line("header_timeout"),
         _refusal_line("header_timeout"), *lines[1:], _refusal_line("unframed")]
    )  # fmt: skip
    assert read_request_lines(data) == requests
    assert connection_refusals(data).model_dump() == {
        "over_limit": 1, "header_timeout": 2, "body_timeout": 0, "unframed": 1
    }  # fmt: skip
    assert connection_refusals(_request_lines()) == NO_REFUSALS


def test_a_bad_connection_line_refuses_the_whole_file() -> None:
    for bad in (b'{"refusal":"over_limit","schema":"harness.receipt.worker_connection/1","x":1}',
                _refusal_line("guessed")):  # fmt: skip
        data = _request_lines() + bad + b"\n"
        assert _kind(read_request_lines, data) == "schema_invalid"
        assert _kind(connection_refusals, data) == "schema_invalid"
