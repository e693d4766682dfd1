"""harness doctor: three-valued checks with fixed fixes; exit status from required ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from host import doctor


def test_every_check_answers_with_a_closed_state(tmp_path: Path) -> None:
    checks = doctor.run_checks(tmp_path)
    assert {c.state for c in checks} <= {"ok", "missing", "insufficient", "unread"}
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
