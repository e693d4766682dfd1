"""QEMU's spawn: inside the cgroup before exec, and killed when its parent dies."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host.cgroups import Cgroup


def state(pid: int) -> str | None:
    """The process state letter, or None if the pid is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


@pytest.mark.integration
def test_child_runs_in_the_cgroup_and_dies_with_its_parent(
    vm_cgroup: Cgroup, tmp_path: Path
) -> None:
    # An intermediate process spawns `sleep` the way QEMU is spawned, then exits.
    code = f"""
import sys
from pathlib import Path
from host.cgroups import detect
from host.vm.process import spawn_qemu
cg = detect().open({vm_cgroup.name!r})
child = spawn_qemu(["sleep", "300"], cg, Path({str(tmp_path / "log")!r}))
print(child.pid, child.pid in cg.member_pids(), flush=True)
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).parents[3],
    )
    pid_text, in_cgroup = done.stdout.decode().split()
    pid = int(pid_text)
    assert in_cgroup == "True"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and state(pid) not in (None, "Z"):
        time.sleep(0.05)
    alive = state(pid) not in (None, "Z")
    if alive:
        os.kill(pid, 9)
    assert not alive, "the child outlived its parent: PR_SET_PDEATHSIG is not set"
