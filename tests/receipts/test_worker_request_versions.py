"""worker_requests/*: the harness writes version 2 (with `tools_rendering`); the audit
still reads version 1, from receipts written before the worker recorded how tools
reached the model. Each version stays closed: a body under the other version's id is a
finding, and a version-2 error code is not valid in a version-1 record."""

from __future__ import annotations

import json

from receipts.audit import audit_and_read
from receipts.canonical import canonical
from receipts.records import WorkerRequestRecord
from receipts.records.legacy import WorkerRequestRecordV1
from tests.receipts import tamper

ENTRY = "worker_requests/000000.json"


def _current() -> dict[str, object]:
    body: dict[str, object] = json.loads(tamper.good_entries()[ENTRY])
    return body


def _v1() -> dict[str, object]:
    body = _current()
    del body["tools_rendering"]
    body["schema"] = "harness.receipt.worker_request/1"
    return body


def _with_request(body: dict[str, object]) -> bytes:
    entries = tamper.legacy_entries()
    entries[ENTRY] = canonical(body)
    return tamper.forge(entries)


def test_a_version_1_request_record_is_read_as_version_1() -> None:
    audit, read = audit_and_read(_with_request(_v1()))
    assert audit.valid, audit.findings
    assert read is not None and isinstance(read.worker_requests[0], WorkerRequestRecordV1)


def test_a_version_2_request_record_is_read_as_version_2() -> None:
    audit, read = audit_and_read(_with_request(_current()))
    assert audit.valid, audit.findings
    assert read is not None and isinstance(read.worker_requests[0], WorkerRequestRecord)
    assert read.worker_requests[0].tools_rendering == "template"


def test_bodies_under_the_other_version_id_are_findings() -> None:
    v2_under_v1 = {**_current(), "schema": "harness.receipt.worker_request/1"}
    v1_under_v2 = {**_v1(), "schema": "harness.receipt.worker_request/2"}
    new_code_in_v1 = {**_v1(), "error_code": "tool_argument_too_long"}
    unknown_rendering = {**_current(), "tools_rendering": "guessed"}
    for body in (v2_under_v1, v1_under_v2, new_code_in_v1, unknown_rendering):
        audit, _read = audit_and_read(_with_request(body))
        assert not audit.valid, body
