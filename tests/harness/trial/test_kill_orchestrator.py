"""`kill -9` of the orchestrator, then `harness gc`: nothing of that trial is left.

Real processes, no planted leftovers: a real `harness trial` (qemu backend) or a small
real owner of a VM acquired through the trial's VM stage (libvirt backend) runs as a
subprocess; once its guest runs, the orchestrator gets SIGKILL, so its teardown never
runs. Before gc, the trial's cgroup and directories must still be there (so the test
can see gc do its job); after `harness gc`, every receipt it prints is `confirmed` and
no process, cgroup, directory, libvirt domain or open port of that trial remains.
While the orchestrator still lives, `gc --dry-run` must not list its trial at all
(its lease, host/vm/lease.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from host.cgroups import detect
from host.vm.leftovers import LIBVIRT_LOG_DIR, find_processes, find_trial_dirs
from host.vm.ports import probe_port

pytestmark = pytest.mark.integration
REPO = Path(__file__).parents[3]
TRIALS = Path.home() / ".cache" / "harness" / "trials"
SOLUTION = "profiles/tasks/py-one-line-fix/scripts/solution.json"
UP_DEADLINE_S = 600.0
HOSTFWD = re.compile(rb"hostfwd=tcp:127\.0\.0\.1:(\d+)-:22")


def _qemu_cmdline(tag: str) -> bytes | None:
    for process in find_processes(qemu_only=True):
        if process.tag == tag:
            try:
                return Path(f"/proc/{process.pid}/cmdline").read_bytes()
            except OSError:
                return None
    return None


def _child_vm_tag(orchestrator: subprocess.Popen[bytes]) -> str | None:
    """The tag of a full-boot QEMU (one with a hostfwd) whose parent is `orchestrator`."""
    for process in find_processes(qemu_only=True):
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(re.search(r"^PPid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
        if ppid == orchestrator.pid and HOSTFWD.search(cmdline):
            return process.tag
    return None


def _start(backend: str, trials_root: Path, out: Path) -> tuple[subprocess.Popen[bytes], str]:
    if backend == "qemu":
        argv = [
            *(sys.executable, "-m", "harness.cli", "trial", "--profile", "tiny"),
            *("--agent", f"scripted:{SOLUTION}", "--accel", "tcg", "--out", str(out)),
        ]
    else:
        argv = [
            *(sys.executable, "-m", "tests.harness.trial.vm_owner", "--backend", backend),
            *("--trials-root", str(trials_root)),
        ]
    child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + UP_DEADLINE_S
    tag: str | None = None
    while tag is None and time.monotonic() < deadline and child.poll() is None:
        if backend == "qemu":
            tag = _child_vm_tag(child)
            time.sleep(0.2)
        else:
            assert child.stdout is not None
            tag = child.stdout.readline().decode().strip() or None
    if tag is None:
        child.kill()
        child.wait()
        pytest.fail("the orchestrator's VM never came up")
    return child, tag


def _trial_dirs(tag: str, trials_root: Path) -> list[Path]:
    return [p for p in find_trial_dirs(trials_root) if tag in p.name]


def _cgroups(tag: str) -> list[str]:
    listing = detect().list_names(prefix=f"trial-{tag}")
    return sorted({name for item in listing.values() for name in item.names})


@pytest.mark.parametrize("backend", ["qemu", "libvirt"])
def test_gc_releases_everything_a_killed_orchestrator_left(backend: str, tmp_path: Path) -> None:
    # A short root for the owner: the QMP socket path inside must stay under 100 bytes.
    trials_root = TRIALS if backend == "qemu" else Path(tempfile.mkdtemp(prefix="hko-"))
    child, tag = _start(backend, trials_root, tmp_path / "out")
    cmdline = _qemu_cmdline(tag)
    assert cmdline is not None, "the VM runs when the orchestrator is killed"
    port_match = HOSTFWD.search(cmdline)
    assert port_match is not None
    port = int(port_match.group(1))

    gc_argv = [sys.executable, "-m", "harness.cli", "gc", "--trials-root", str(trials_root)]
    # While the orchestrator lives, its lease keeps gc's hands off this trial.
    dry = subprocess.run(
        [*gc_argv, "--dry-run"], cwd=REPO, capture_output=True, check=False, timeout=120
    )
    assert dry.returncode == 0 and tag.encode() not in dry.stdout

    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    # The guest does not outlive its orchestrator even before gc: the kernel's PDEATHSIG
    # (qemu) or libvirt's AUTODESTROY (libvirt) ends QEMU on its own.
    deadline = time.monotonic() + 30
    while _qemu_cmdline(tag) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _qemu_cmdline(tag) is None, "QEMU outlived its killed orchestrator"

    # What the dead orchestrator could not release: gc has work to do.
    assert _cgroups(tag) == [f"trial-{tag}"]
    left = {p.name.split("-")[0] for p in _trial_dirs(tag, trials_root)}
    assert {"harness", "data"} <= left, left
    dry = subprocess.run(
        [*gc_argv, "--dry-run"], cwd=REPO, capture_output=True, check=False, timeout=120
    )
    assert tag.encode() in dry.stdout
    done = subprocess.run(gc_argv, cwd=REPO, capture_output=True, check=False, timeout=120)
    receipts = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, receipts
    assert receipts and {r["status"] for r in receipts} == {"confirmed"}
    assert {r["released_by"] for r in receipts} == {"gc"}

    assert [p for p in find_processes() if p.tag == tag] == []
    assert _cgroups(tag) == []
    assert _trial_dirs(tag, trials_root) == []
    assert not (trials_root / f"lease-{tag}").exists()
    assert not (LIBVIRT_LOG_DIR / f"harness-vm-{tag}.log").exists()
    assert [p for p in Path(tempfile.gettempdir()).iterdir() if tag in p.name] == []
    assert probe_port(port) == "refusing"
    if backend == "libvirt":
        from host.vm.virtconn import domain_state, open_connection

        conn = open_connection()
        try:
            assert domain_state(conn, f"harness-vm-{tag}") == "absent"
        finally:
            conn.close()
        assert list(trials_root.iterdir()) == []  # gc left nothing of the trial behind
        trials_root.rmdir()
