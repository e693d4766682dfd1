"""worker_requests/*: the harness writes version 3 (with `cut`); the audit still reads
version 2 (with `tools_rendering`, no `cut`) and version 1, from receipts written before.
Each version stays closed: a body under another version's id is a finding, a newer
error code is not valid in an older record, and a `/3` record's cut and ending must
tell one story."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from receipts.audit import audit_and_read
from receipts.canonical import canonical
from receipts.records import WorkerRequestRecord
from receipts.records.legacy import WorkerRequestRecordV1, WorkerRequestRecordV2
from tests.receipts import tamper

ENTRY = "worker_requests/000000.json"


def _current() -> dict[str, object]:
    body: dict[str, object] = json.loads(tamper.good_entries()[ENTRY])
    return body


def _v2() -> dict[str, object]:
    body = _current()
    del body["cut"]
    body["schema"] = "harness.receipt.worker_request/2"
    return body


def _v1() -> dict[str, object]:
    body = _v2()
    del body["tools_rendering"]
    body["schema"] = "harness.receipt.worker_request/1"
    return body


def _with_request(body: dict[str, object]) -> bytes:
    entries = tamper.legacy_entries()
    entries[ENTRY] = canonical(body)
    return tamper.forge(entries)


@pytest.mark.parametrize(
    ("body", "kind"),
    [(_v1, WorkerRequestRecordV1), (_v2, WorkerRequestRecordV2), (_current, WorkerRequestRecord)],
)
def test_each_version_is_read_as_itself(body: object, kind: type) -> None:
    audit, read = audit_and_read(_with_request(body()))  # type: ignore[operator]
    assert audit.valid, audit.findings
    assert read is not None and type(read.worker_requests[0]) is kind


def test_bodies_under_another_version_id_are_findings() -> None:
    bodies = [
        {**_current(), "schema": "harness.receipt.worker_request/2"},
        {**_v2(), "schema": "harness.receipt.worker_request/3"},
        {**_v2(), "schema": "harness.receipt.worker_request/1"},
        {**_v1(), "schema": "harness.receipt.worker_request/2"},
        {**_v1(), "error_code": "tool_argument_too_long"},
        {**_v2(), "error_code": "tool_argument_too_many_items"},
        {**_current(), "tools_rendering": "guessed"},
        {**_current(), "cut": "guessed"},
    ]
    for body in bodies:
        audit, _read = audit_and_read(_with_request(body))
        assert not audit.valid, body


def _request(**fields: object) -> dict[str, object]:
    return {**_current(), "outcome": "stop", "error_code": None, "cut": None, **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"outcome": "length", "cut": "max_tokens"},
        {"outcome": "length", "cut": "text_chars"},
        {"outcome": "invalid_model_output", "error_code": "tool_argument_too_long",
         "cut": "tool_string_chars", "http_status": 502},
        {"outcome": "invalid_model_output", "error_code": "tool_argument_too_many_items",
         "cut": "tool_array_items", "http_status": 502},
        {"outcome": "invalid_model_output", "error_code": "invalid_model_output",
         "http_status": 502},
        {},
    ],
)  # fmt: skip
def test_a_cut_that_is_its_ending_is_a_record(fields: dict[str, object]) -> None:
    WorkerRequestRecord.model_validate(_request(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        {"outcome": "length"},  # cut short, by no cap
        {"cut": "max_tokens"},  # a cap, but it stopped on its own
        {"outcome": "length", "cut": "tool_array_items"},
        {"outcome": "invalid_model_output", "error_code": "tool_argument_too_long",
         "http_status": 502},  # refused for a cap it does not name
        {"outcome": "invalid_model_output", "error_code": "tool_argument_too_many_items",
         "cut": "tool_string_chars", "http_status": 502},
        {"outcome": "invalid_model_output", "error_code": "invalid_model_output",
         "cut": "tool_string_chars", "http_status": 502},
    ],
)  # fmt: skip
def test_a_cut_and_an_ending_that_disagree_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="one story"):
        WorkerRequestRecord.model_validate(_request(**fields))
