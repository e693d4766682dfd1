"""A read-only disk that cannot be written on the host is the VM stage's own closed
category (`data_disk_failed`), and the trial's receipt says so and audits valid.

Neither is `qemu_start_failed` (QEMU never ran) nor a defect of the harness
(`failed_internal`, exit 4): an OSError while copying the disk's tree and an ImageError
from building its ext4 image are both this category. No VM: both failures happen on
the host before QEMU would start.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any, cast

import pytest

from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.guestboot import AgentDisk
from harness.trial.owned import OwnedResources
from harness.trial.pipeline import Trial
from harness.trial.vmstage import DiskPlan, StartRequest, VmHandle, VmStageFailed, _boot
from receipts.claim import claim
from receipts.ownership import GUEST_OWNS
from receipts.recordset import RecordSet
from tests.receipts.builders import accepted_scripted_trial, replace, with_changes

TASKS = Path(__file__).parents[3] / "profiles" / "tasks"
SOLUTION = TASKS / "py-one-line-fix" / "scripts" / "solution.json"


class _DiskFull(AgentDisk):
    """The host's disk fills while the read-only disk's tree is copied."""

    def build_runtimes(self) -> None:
        return None

    def data_source(self) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_tree_that_cannot_be_copied_is_data_disk_failed(tmp_path: Path) -> None:
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=SOLUTION,
        out_dir=tmp_path / "out",
        accel="tcg",
        cache=tmp_path / "cache",
    )
    with pytest.raises(VmStageFailed) as failed:
        trial = Trial(options)
        asyncio.run(_DiskFull(trial.context, tmp_path, trial.prepared).plan("tcg"))
    assert failed.value.category == "data_disk_failed"


def test_an_image_that_cannot_be_built_is_data_disk_failed(tmp_path: Path) -> None:
    """The tree is not a directory: build_data_disk refuses it (ImageError). Nothing
    after the disk is reached, so the guest parts of the call are never used."""
    handle = VmHandle(cast(Any, None), OwnedResources().owner(()))
    with pytest.raises(VmStageFailed) as failed:
        asyncio.run(
            _boot(
                handle,
                tmp_path,
                profile=load_profile("tiny"),
                image=cast(Any, None),
                tag="0" * 16,
                trial_root=tmp_path,
                backend=cast(Any, None),
                accelerator=("tcg", "forced_by_flag"),
                disk_plan=DiskPlan(tmp_path / "not-a-tree", None),
                memory_mib=512,
                owner=OwnedResources().owner(GUEST_OWNS["qemu"]),
                starts=StartRequest("cold", tmp_path),
            )
        )
    assert (failed.value.category, failed.value.handle) == ("data_disk_failed", handle)


def test_the_receipt_of_a_data_disk_failure_is_valid_and_failed_vm(tmp_path: Path) -> None:
    """What the trial collects when the VM stage failed this way (its VM record, no
    host key and no end of QEMU: QEMU never ran), claimed and audited as any receipt."""
    from receipts.audit import audit_bytes
    from receipts.bundle import write_bundle

    base = accepted_scripted_trial()
    assert base.trial is not None and base.vm is not None
    vm = replace(base.vm, category="data_disk_failed", host_key_sha256=None, qemu_end=None)
    collected: RecordSet = with_changes(
        base,
        trial=replace(base.trial, verdict="evidence_incomplete"),
        vm=vm,
        gate=None,
        agent=None,
        verification=None,
        verifier_vm=None,
        agent_turns=(),
        tool_calls=(),
        cleanup=tuple(
            replace(c, index=i)
            for i, c in enumerate(
                c for c in base.cleanup if c.resource in ("cgroup", "data_disk", "trial_scratch")
            )
        ),
    )
    records = claim(collected)
    assert records.trial is not None
    assert (records.trial.verdict, records.trial.failed_stage) == ("failed_vm", "vm")
    write_bundle(records, tmp_path / "trial.zip")
    assert audit_bytes((tmp_path / "trial.zip").read_bytes()).valid
