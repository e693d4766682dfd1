"""memory.json: the harness writes version 2; the audit still reads version 1.

Version 1 was declared before anything wrote it; a receipt carrying it is read as
version 1 (never re-interpreted as 2), and a version-2 body under the version-1 schema
id, or the reverse, is a schema finding.
"""

from __future__ import annotations

from receipts.audit import audit_and_read
from receipts.canonical import canonical
from receipts.records import MemoryRecord
from receipts.records.legacy import MemoryRecordV1
from tests.receipts import tamper

V1 = {
    "interval_ms": 50,
    "samples": [{"at_ms": 0, "deciding_scope": "self", "headroom_bytes": 1 << 30}],
    "schema": "harness.receipt.memory/1",
}
V2_SAMPLE = {
    "at_ms": 0,
    "host_available_bytes": 1 << 34,
    "host_page_cache_bytes": 1 << 30,
    "qemu_usage_bytes": None,
    "qemu_working_set_bytes": None,
    "worker_usage_bytes": None,
    "worker_working_set_bytes": None,
}


def _with_memory(body: dict[str, object]) -> bytes:
    entries = tamper.legacy_entries()
    entries["memory.json"] = canonical(body)
    return tamper.forge(entries)


def test_a_version_1_memory_record_is_read_as_version_1() -> None:
    audit, read = audit_and_read(_with_memory(V1))
    assert audit.valid, audit.findings
    assert read is not None and isinstance(read.memory, MemoryRecordV1)


def test_a_version_2_memory_record_is_read_as_version_2() -> None:
    body = {"interval_ms": 1000, "samples": [V2_SAMPLE], "schema": "harness.receipt.memory/2"}
    audit, read = audit_and_read(_with_memory(body))
    assert audit.valid, audit.findings
    assert read is not None and isinstance(read.memory, MemoryRecord)


def test_bodies_under_the_other_version_id_are_findings() -> None:
    v2_under_v1 = {"interval_ms": 50, "samples": [V2_SAMPLE], "schema": "harness.receipt.memory/1"}
    v1_under_v2 = {**V1, "schema": "harness.receipt.memory/2"}
    for body in (v2_under_v1, v1_under_v2):
        audit, _read = audit_and_read(_with_memory(body))
        assert not audit.valid
