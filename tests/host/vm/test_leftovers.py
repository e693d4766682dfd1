"""gc's finders: QEMU processes and scratch directories are found by their names."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from host.vm.leftovers import LeftoverProcess, find_processes, find_scratch_dirs
from host.vm.scratch import create_scratch


def test_a_process_is_found_by_the_tag_in_its_command_line() -> None:
    tag = "feedface12345678"
    child = subprocess.Popen(
        ["sh", "-c", "sleep 30; :", f"harness-vm-{tag}"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 5
        found: list[LeftoverProcess] = []
        while time.monotonic() < deadline:  # until the child has exec'd sleep
            found = [p for p in find_processes() if p.pid == child.pid]
            if found:
                break
            time.sleep(0.02)
        assert found == [LeftoverProcess(child.pid, tag)]
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the shell and its sleep
        child.wait()
    assert all(p.pid != child.pid for p in find_processes())


def test_scratch_dirs_are_found_and_nothing_else(tmp_path: Path) -> None:
    made = create_scratch(tmp_path, "0badc0de")
    (tmp_path / "harness-vm-notatag").mkdir()
    (tmp_path / "unrelated").mkdir()
    assert find_scratch_dirs(tmp_path) == [made]
