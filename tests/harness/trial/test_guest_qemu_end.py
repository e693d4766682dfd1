"""A guest's VM record is completed with how its QEMU ended, once that QEMU was stopped.

The record is read while the guest's cgroup still exists (its peak memory and OOM kills)
and before its QEMU is stopped; `Guest.ended` then adds QEMU's end and changes nothing
else. A real process (`sleep`, `python -c`) stands in for QEMU, so the end is read by
the real `QemuVm.stop` from the real waitpid; test_trial_vm.py does the same with real
QEMUs in real trials.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from harness.profiles import load_profile
from harness.trial.guests import Guest
from harness.trial.owned import OwnedResources
from harness.trial.vmstage import VmHandle, vm_record
from host.ssh import generate_trial_keys
from host.vm import QemuVm, VmSpec
from receipts.records import VerifierVmRecord
from receipts.records.vm import QemuEnd


class NoImage:
    vmlinux = Path("/nonexistent/vmlinux")
    initramfs = Path("/nonexistent/initramfs")
    base = Path("/nonexistent/base.qcow2")


class UnreadCgroup:
    """A cgroup whose memory cannot be read: the record says None there (unread)."""

    def read_memory(self) -> Any:
        raise OSError("unread")


def _guest(tmp_path: Path, argv: list[str]) -> tuple[Guest, QemuVm]:
    vm = QemuVm(
        VmSpec(
            tag=uuid.uuid4().hex[:16],
            image=NoImage(),
            cgroup=cast(Any, None),
            scratch_root=tmp_path,
            accelerator="tcg",
            accelerator_reason="forced_by_flag",
        )
    )
    vm.keys = generate_trial_keys()  # so the record is made from the VM's facts
    vm.process = subprocess.Popen(argv)
    guest = Guest()
    guest.handle = VmHandle(cast(Any, UnreadCgroup()), OwnedResources().owner(()), vm=vm)
    return guest, vm


def _record(guest: Guest):  # type: ignore[no-untyped-def]
    return vm_record(guest.handle, guest.category, load_profile("tiny"), backend="qemu")


@pytest.mark.parametrize(
    ("argv", "end"),
    [
        (["sleep", "300"], QemuEnd(stop="sigkill", exit_code=None, signal=9)),
        ([sys.executable, "-c", "pass"], QemuEnd(stop="already_exited", exit_code=0, signal=None)),
    ],
)
async def test_a_record_read_before_the_stop_is_completed_after_it(
    tmp_path: Path, argv: list[str], end: QemuEnd
) -> None:
    """Read before the stop: no end yet (never guessed). Completed after it: the end the
    stop read, every other field as read. Mutation control: `Guest.ended` that passes
    None fails here."""
    guest, vm = _guest(tmp_path, argv)
    if argv[0] == sys.executable:
        assert vm.process is not None
        vm.process.wait(timeout=30)  # it ended by itself before the stop
    before = _record(guest)
    assert before.qemu_end is None
    await vm.stop(deadline_s=0.5)
    after = guest.ended(before)
    assert after.qemu_end == end
    assert after.model_dump(exclude={"qemu_end"}) == before.model_dump(exclude={"qemu_end"})
    verifier = guest.ended(VerifierVmRecord.of(before, "after_agent"))
    assert isinstance(verifier, VerifierVmRecord) and verifier.qemu_end == end


async def test_a_guest_without_a_vm_has_no_end() -> None:
    """The VM stage failed before a VM was made: None, not a guessed end."""
    guest = Guest()
    record = vm_record(None, "cgroup_apply_failed", load_profile("tiny"), backend="qemu")
    assert guest.ended(record).qemu_end is None
