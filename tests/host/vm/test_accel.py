"""Accelerator choice: a probe boot decides, and the probe can tell success from failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from host.cgroups import Cgroup
from host.image import GuestImage
from host.vm.accel import ConsoleSilence, choose_accelerator, kvm_device_state, probe_boot


def test_missing_device_means_tcg_without_booting(tmp_path: Path) -> None:
    assert kvm_device_state(tmp_path / "kvm") == "kvm_device_absent"


def test_a_console_that_grows_is_not_silent(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    silence = ConsoleSilence(log, 0.0, 4.0)
    assert not silence.stalled(3.9)  # nothing yet: counted from the start
    assert silence.stalled(4.0)
    log.write_bytes(b"SeaBIOS\r\n")
    assert not silence.stalled(5.0)  # it grew: counted from here
    assert not silence.stalled(8.9)
    log.write_bytes(b"SeaBIOS\r\nLinux version\r\n")
    assert not silence.stalled(9.0)
    assert not silence.stalled(12.9)
    assert silence.stalled(13.0)


async def test_forced_choice_is_recorded_as_forced(tmp_path: Path) -> None:
    choice = await choose_accelerator(
        "tcg",
        tmp_path / "vmlinux",
        tmp_path / "initramfs",
        cgroup=None,  # type: ignore[arg-type]  # a forced choice boots nothing
        scratch_root=tmp_path,
        tag="00000000",
    )
    assert (choice.accelerator, choice.reason, choice.probe_ms) == ("tcg", "forced_by_flag", None)


async def test_auto_without_device_is_tcg(tmp_path: Path) -> None:
    choice = await choose_accelerator(
        "auto",
        tmp_path / "vmlinux",
        tmp_path / "initramfs",
        cgroup=None,  # type: ignore[arg-type]  # no device: nothing is booted
        scratch_root=tmp_path,
        tag="00000000",
        device=tmp_path / "kvm",
    )
    assert (choice.accelerator, choice.reason) == ("tcg", "kvm_device_absent")


@pytest.mark.integration
async def test_probe_detects_a_booting_guest(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    # Positive control: under TCG the probe guest reaches userspace and says so.
    reason = await probe_boot(
        guest_image.vmlinux,
        guest_image.initramfs,
        accelerator="tcg",
        cgroup=vm_cgroup,
        scratch_root=scratch_root,
        tag="aaaa0001",
        deadline_s=60,
    )
    assert reason == "probe_booted"


@pytest.mark.integration
async def test_auto_boots_a_kvm_probe_and_records_why(
    guest_image: GuestImage, vm_cgroup: Cgroup, scratch_root: Path
) -> None:
    choice = await choose_accelerator(
        "auto",
        guest_image.vmlinux,
        guest_image.initramfs,
        cgroup=vm_cgroup,
        scratch_root=scratch_root,
        tag="aaaa0002",
        deadline_s=15,
    )
    if Path("/sys/module/kvm_pvm").exists():  # FIELD-NOTES: KVM through PVM fails guests
        assert choice.accelerator == "tcg"
        assert choice.reason in ("probe_failed", "probe_timeout")
        assert choice.probe_ms is not None
        # a stopped guest is told by its silent console, not by the whole deadline
        assert choice.probe_ms < 10_000, choice
    assert (choice.accelerator == "kvm") == (choice.reason == "probe_booted")
