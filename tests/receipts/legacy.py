"""The old harness's receipt (hoststate/1) the tests read: where it came from and how
it is completed. Provenance: tests/receipts/test_hoststate_versions.py."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from receipts.canonical import canonical
from receipts.recordset import MANIFEST_NAME
from tests.receipts import tamper

FIXTURE = Path(__file__).parent / "fixtures" / "hoststate-v1-golden.zip"


def fixture_entries() -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(FIXTURE.read_bytes())) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


MISSING_FROM_FIXTURE = (
    "data_disk",
    "forwarded_port",
    "ssh_keys",
    "worker_process",
    "worker_socket",
    "cgroup",
)
"""The cleanup receipts the fixture's own records require (receipts/cleanupset.py) and
that it lacks: the test builders it came from wrote 5 cleanup receipts no real trial
writes. A real receipt of that harness has them all; the fixture, as it is, is now
refused (`cleanup_missing`), which is the rule doing its job on an old receipt."""


def v1_entries() -> dict[str, bytes]:
    """The old receipt's entries with the missing cleanup receipts appended (as a real
    trial of that harness wrote them), under a manifest that matches again."""
    entries = fixture_entries()
    entries.pop(MANIFEST_NAME)
    count = sum(1 for name in entries if name.startswith("cleanup/"))
    for offset, resource in enumerate(MISSING_FROM_FIXTURE):
        evidence = {"cgroup": "cgroup_empty_and_removed", "forwarded_port": "port_refusing"}
        record = {
            "schema": "harness.receipt.cleanup/1",
            "index": count + offset,
            "resource": resource,
            "status": "confirmed",
            "evidence": evidence.get(resource, "file_absent")
            if resource != "worker_process"
            else "process_reaped",
            "released_by": "trial",
            "duration_ms": 3,
        }
        entries[f"cleanup/{count + offset:06d}.json"] = canonical(record)
    with zipfile.ZipFile(io.BytesIO(tamper.forge(entries))) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def v1_receipt() -> bytes:
    """The completed old receipt as ZIP bytes."""
    return tamper.forge(v1_entries())
