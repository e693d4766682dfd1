"""The trial lease: held while the orchestrator lives, free the moment it is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host.vm.lease import LeaseHeld, TrialLease, is_live, lease_path

HOLDER = """
import sys, time
from pathlib import Path
from host.vm.lease import TrialLease
lease = TrialLease(Path(sys.argv[1]), sys.argv[2])
lease.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_held_lease_is_live_and_exclusive(tmp_path: Path) -> None:
    assert not is_live(tmp_path, "abc")
    with TrialLease(tmp_path, "abc"):
        assert is_live(tmp_path, "abc")
        with pytest.raises(LeaseHeld):
            TrialLease(tmp_path, "abc").acquire()
        assert not is_live(tmp_path, "other")
    assert not is_live(tmp_path, "abc")
    assert not lease_path(tmp_path, "abc").exists()


def test_a_killed_holder_frees_its_lease_but_leaves_the_file(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), "dead"],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).parents[3],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert is_live(tmp_path, "dead")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        deadline = time.monotonic() + 5
        while is_live(tmp_path, "dead") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not is_live(tmp_path, "dead")
        assert lease_path(tmp_path, "dead").exists(), "gc removes a dead trial's lease file"
    finally:
        holder.kill()
        holder.wait()
