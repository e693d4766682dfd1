"""Which guests are restored, which boot cold and why, and what the record allows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pydantic
import pytest

from harness.trial.gueststart import GuestShape, cold, cold_reason, plan_start
from receipts.records.vm import GuestStart
from tests.receipts.builders import restored_start


def test_only_a_qemu_tcg_guest_without_a_worker_channel_is_restored() -> None:
    assert cold_reason("snapshot", "qemu", "tcg", worker_channel=False) is None
    assert cold_reason("cold", "qemu", "tcg", worker_channel=False) == "requested_cold"
    assert cold_reason("snapshot", "libvirt", "tcg", worker_channel=False) == "backend_libvirt"
    assert cold_reason("snapshot", "qemu", "kvm", worker_channel=False) == "accelerator_kvm"
    assert cold_reason("snapshot", "qemu", "tcg", worker_channel=True) == "worker_channel"


async def test_a_guest_that_boots_cold_never_touches_the_snapshot_cache(tmp_path: Path) -> None:
    plan = await plan_start(
        request="snapshot",
        backend="libvirt",
        guest=GuestShape("tcg", 1024, 2, 64),
        worker_channel=False,
        image=cast(Any, None),
        cache=tmp_path,
        cgroup=cast(Any, None),
        deadline_s=1.0,
        tag="0" * 16,
    )
    assert plan.snapshot is None and plan.record == cold("backend_libvirt").record
    assert not (tmp_path / "snapshots").exists()


def test_the_start_record_tells_one_story() -> None:
    restored = restored_start().model_dump()
    booted = cold("worker_channel").record.model_dump()
    contradictions = [
        {**restored, "cold_boot_reason": "requested_cold"},  # restored and booted
        {**restored, "snapshot_key": None},  # restored from no snapshot
        {**restored, "make_ms": 1200},  # found present, yet made by this trial
        {**restored, "found": "absent"},  # made by this trial, but not timed
        {**booted, "cold_boot_reason": None},  # booted for no reason
        {**booted, "snapshot_key": "a" * 64},  # booted, naming a snapshot
        {**booted, "make_ms": 10},  # timed making, without a failed making
    ]
    for fields in contradictions:
        with pytest.raises(pydantic.ValidationError):
            GuestStart.model_validate(fields)
    GuestStart.model_validate({**restored, "found": "digest_mismatch", "make_ms": 5100})
    GuestStart.model_validate({**booted, "cold_boot_reason": "snapshot_failed", "make_ms": 9})
