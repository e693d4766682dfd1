"""harness doctor: three-valued checks with fixed fixes; exit status from required ones."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from host import doctor
from host.cgroups import detect
from host.vm.accel import probe_boot
from tests.host.image.support import session_image


def test_every_check_answers_with_a_closed_state(tmp_path: Path) -> None:
    checks = doctor.run_checks(tmp_path)
    assert {c.state for c in checks} <= {"ok", "missing", "insufficient", "unread"} | {
        "present",
        "usable",
        "unusable",
    }
    assert len({c.name for c in checks}) == len(checks)
    by_name = {c.name: c for c in checks}
    assert by_name["cgroups"].state == "ok"
    assert by_name["cgroups_writable"].state == "ok"  # creates and removes a real cgroup
    assert by_name["memory"].state == "ok"


def test_missing_tools_are_missing_with_their_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert doctor._tools("qemu-system-x86_64") == "missing"
    assert doctor._test_runners() == "missing"


def test_libvirt_is_ok_only_when_the_daemon_answers() -> None:
    # The binaries and libvirt-python are installed by .ci/setup on this host kind.
    assert doctor._libvirt(lambda: True) == "ok"
    assert doctor._libvirt(lambda: False) == "missing"


def test_libvirt_without_its_binaries_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert doctor._libvirt(lambda: True) == "missing"


def test_unreadable_disk_is_unread_not_missing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert doctor._disk(blocker / "cache") == "unread"


def test_json_output_and_exit_status() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    checks = json.loads(result.stdout)
    failing_required = [c for c in checks if c["required"] and c["state"] != "ok"]
    assert result.returncode == (1 if failing_required else 0)
    assert all(set(c) == {"name", "state", "required", "fix"} for c in checks)


def test_kvm_without_a_device_is_missing_and_an_unopenable_one_unread(tmp_path: Path) -> None:
    assert doctor._kvm(tmp_path, device=tmp_path / "kvm") == "missing"
    (tmp_path / "dir").mkdir()  # exists, cannot be opened read-write
    assert doctor._kvm(tmp_path, device=tmp_path / "dir") == "unread"


def test_a_kvm_device_alone_is_only_present(tmp_path: Path) -> None:
    """No image to probe with: the device is there, nothing more is known. Mutation
    control: the check back to "ok" when /dev/kvm exists."""
    device = tmp_path / "kvm"
    device.write_bytes(b"")  # opens read-write, like a device node that exists
    assert doctor._kvm(tmp_path / "no-images", device=device) == "present"


@pytest.mark.integration
async def test_kvm_is_what_the_trials_own_probe_says() -> None:
    """With the cached guest image, doctor boots the trial's probe guest under KVM. On
    this project's reference host /dev/kvm opens but a guest cannot run (KVM through
    PVM), so it is `unusable`; the expected answer is the probe's own, booted here."""
    image = session_image()
    images = image.directory.parent
    hierarchy = detect()
    cgroup = hierarchy.create(f"tdoctor{uuid.uuid4().hex[:8]}")
    scratch = Path(tempfile.mkdtemp(prefix="tdoctor-"))  # short: QMP socket path limit
    try:
        reason = await probe_boot(
            image.vmlinux,
            image.initramfs,
            accelerator="kvm",
            cgroup=cgroup,
            scratch_root=scratch,
            tag=uuid.uuid4().hex[:16],
            deadline_s=15.0,
        )
    finally:
        cgroup.kill_members()
        cgroup.remove()
        shutil.rmtree(scratch, ignore_errors=True)
    expected = "usable" if reason == "probe_booted" else "unusable"
    state = await asyncio.to_thread(doctor._kvm, images)
    assert state == expected
    assert state != "present"  # it was probed, not only found
