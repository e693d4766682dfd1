"""gc releases a killed trial's leftovers by name and touches nothing else."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from host.cgroups.detect import detect
from host.gc import collect, find_leftovers

pytestmark = pytest.mark.integration
TAG = "0123abcd4567ef89"


def test_gc_releases_a_trials_leftovers_and_nothing_else(tmp_path: Path) -> None:
    hierarchy = detect()
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    group = hierarchy.create(f"trial-{TAG}")
    bystander = hierarchy.create("other-gc-test")
    qemu = subprocess.Popen(
        [
            "qemu-system-x86_64",
            "-name",
            f"guest=harness-vm-{TAG}",
            "-machine",
            "none",
            "-nodefaults",
            "-display",
            "none",
            "-S",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        group.add_process(qemu.pid)
        (tmp_path / f"data-{TAG}").mkdir()
        (tmp_path / f"harness-vm-{TAG}-x1y2z3").mkdir()
        (tmp_path / "keep-me").mkdir()
        (temp_root / f"harness-trial-{TAG}-a1b2c3d4").mkdir()
        (temp_root / "harness-trial-notatag").mkdir()
        time.sleep(0.3)
        kinds = {item.kind for item in find_leftovers(tmp_path, temp_root)}
        assert kinds == {"qemu_process", "cgroup", "scratch_dir"}
        results = collect(tmp_path, temp_root)
        assert {r.status for _item, r in results} == {"confirmed"}
        assert qemu.wait(timeout=10) is not None
        assert not group.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["keep-me", "tmp"]
        assert sorted(p.name for p in temp_root.iterdir()) == ["harness-trial-notatag"]
        assert bystander.exists()
        assert find_leftovers(tmp_path, temp_root) == []
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()
        for leftover in (group, bystander):
            if leftover.exists():
                leftover.kill_members()
                leftover.remove()
