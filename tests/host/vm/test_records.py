"""Cleanup results and VM facts fill the closed receipt records."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from host.release import CleanupResult, not_acquired
from host.vm.backend import VmFacts
from receipts.records.vm import QemuEnd


def test_cleanup_result_becomes_a_cleanup_record() -> None:
    record = CleanupResult("qemu_process", "confirmed", "process_reaped", 120).to_record(3)
    assert record.to_json() == {
        "schema": "harness.receipt.cleanup/1",
        "index": 3,
        "resource": "qemu_process",
        "status": "confirmed",
        "evidence": "process_reaped",
        "released_by": "trial",
        "duration_ms": 120,
    }
    assert not_acquired("overlay_disk").to_record(0).status == "not_acquired"


def test_vm_facts_become_a_vm_record_with_budgets() -> None:
    facts = VmFacts(
        backend="qemu",
        accelerator="tcg",
        accelerator_reason="probe_failed",
        guest_memory_bytes=1 << 30,
        vcpus=2,
        host_key_sha256="a" * 64,
        boot_to_ssh_ms=6000,
        duration_ms=9000,
    )
    end = QemuEnd(stop="qmp_quit", exit_code=0, signal=None)
    record = facts.to_record(
        "ok", None, qemu_end=end, memory_limit_bytes=2 << 30, swap_limit_bytes=0
    )
    assert record.memory_limit_bytes == 2 << 30 and record.accelerator == "tcg"
    assert record.qemu_end == end
    with pytest.raises(ValueError):
        facts.to_record("ok", None, qemu_end=None, free_text="no")  # type: ignore[call-arg]  # refused at run time too
    with pytest.raises(ValidationError):
        VmFacts(**{**facts.__dict__, "host_key_sha256": "xyz"}).to_record("ok", None, qemu_end=None)
