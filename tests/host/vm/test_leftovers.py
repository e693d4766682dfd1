"""gc's finders: QEMU processes and scratch directories are found by their names."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from host.vm.lease import TrialLease
from host.vm.leftovers import (
    LeftoverProcess,
    find_leftovers,
    find_processes,
    find_scratch_dirs,
    find_trial_dirs,
    find_unowned,
)
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


def test_scratch_dirs_are_found_and_nothing_else() -> None:
    # A short root, not tmp_path: a scratch dir holds unix sockets (108-byte limit), and
    # pytest's numbered tmp_path grew one character too long on a long-lived machine.
    root = Path(tempfile.mkdtemp(prefix="hl-", dir="/tmp"))
    try:
        made = create_scratch(root, "0badc0de")
        (root / "harness-vm-notatag").mkdir()
        (root / "unrelated").mkdir()
        assert find_scratch_dirs(root) == [made]
    finally:
        shutil.rmtree(root)


def test_trial_dirs_are_found_in_both_roots_and_nothing_else(tmp_path: Path) -> None:
    trials, temp = tmp_path / "trials", tmp_path / "tmp"
    made = [
        trials / "harness-vm-0badc0de-Ab_12cd3",
        trials / "data-0badc0de",
        temp / "harness-trial-0badc0de-ab12cd34",
    ]
    for path in made:
        path.mkdir(parents=True)
    for other in ("data-NOTHEX00", "harness-trial-0badc0de", "unrelated"):
        (trials / other).mkdir()
        (temp / other).mkdir(exist_ok=True)
    (temp / "harness-trial-feedf00d-ab12cd34").write_text("a file, not a directory")
    assert find_trial_dirs(trials, temp) == sorted(made)


def test_only_qemu_programs_when_asked(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    for pid, argv in (
        (10, [b"/usr/bin/qemu-system-x86_64", b"-name", b"guest=harness-vm-0badc0de"]),
        (11, [b"sh", b"-c", b"echo harness-vm-0badc0de"]),
    ):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    assert [p.pid for p in find_processes(proc)] == [10, 11]
    assert find_processes(proc, qemu_only=True) == [LeftoverProcess(10, "0badc0de")]


def test_a_live_trials_resources_are_not_leftovers(tmp_path: Path) -> None:
    trials, temp = tmp_path / "trials", tmp_path / "tmp"
    scratch = trials / "harness-trial-0badc0de-ab12cd34"
    data = trials / "data-0badc0de"
    for path in (scratch, data, temp):
        path.mkdir(parents=True)
    with TrialLease(trials, "0badc0de"):
        assert [i for i in find_leftovers(trials, temp) if i.tag == "0badc0de"] == []
    mine = {(i.kind, i.name) for i in find_leftovers(trials, temp) if i.tag == "0badc0de"}
    assert mine == {("scratch_dir", str(scratch)), ("scratch_dir", str(data))}


def test_stale_lease_files_and_libvirt_logs_are_leftovers(tmp_path: Path) -> None:
    trials, logs = tmp_path / "trials", tmp_path / "logs"
    for root in (trials, logs):
        root.mkdir()
    (trials / "lease-0badc0de").write_bytes(b"")  # what a killed orchestrator leaves
    (trials / "lease-nothex").write_bytes(b"")
    (logs / "harness-vm-0badc0de.log").write_bytes(b"")  # what an autodestroyed domain leaves
    (logs / "someone-else.log").write_bytes(b"")
    found = {(i.kind, i.name, i.tag) for i in find_leftovers(trials, tmp_path, logs)}
    assert {
        ("trial_file", str(trials / "lease-0badc0de"), "0badc0de"),
        ("trial_file", str(logs / "harness-vm-0badc0de.log"), "0badc0de"),
    } <= found
    assert all("nothex" not in name and "someone" not in name for _k, name, _t in found)


def _fake_qemu(proc: Path, pid: int, *argv: str) -> None:
    (proc / str(pid)).mkdir(parents=True)
    cmdline = ["/usr/bin/qemu-system-x86_64", *argv]
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline) + b"\0")


def test_a_qemu_of_another_trials_root_is_left_alone(tmp_path: Path) -> None:
    # Why: the lease that says whether a trial lives is in its own root; gc given root A
    # cannot see root B's leases, so B's running trial must not look dead from A.
    mine, theirs, proc = tmp_path / "a", tmp_path / "b", tmp_path / "proc"
    for root in (mine, theirs):
        root.mkdir()
    _fake_qemu(
        proc,
        10,
        "-name",
        "guest=harness-vm-0badc0de",
        "-drive",
        f"file={theirs}/harness-vm-0badc0de-Ab_12cd3/overlay.qcow2",
    )
    assert [i for i in find_leftovers(mine, mine, mine, proc) if i.tag == "0badc0de"] == []
    assert ("qemu_process", "10") in {
        (i.kind, i.name) for i in find_leftovers(theirs, theirs, theirs, proc)
    }


def test_a_trace_in_the_root_makes_a_host_wide_resource_this_roots(tmp_path: Path) -> None:
    trials, proc = tmp_path / "trials", tmp_path / "proc"
    trials.mkdir()
    _fake_qemu(proc, 10, "-name", "guest=harness-vm-0badc0de")
    _fake_qemu(proc, 11, "-name", "guest=harness-vm-feedf00d")
    (trials / "lease-0badc0de").write_bytes(b"")  # what a killed orchestrator leaves
    taken = {(i.kind, i.name) for i in find_leftovers(trials, trials, trials, proc)}
    assert ("qemu_process", "10") in taken
    assert ("qemu_process", "11") not in taken  # no trace of feedf00d in this root
    assert ("qemu_process", "11") in {(i.kind, i.name) for i in find_unowned(trials, trials, proc)}
    with TrialLease(trials, "0badc0de"):  # the same trial, alive: nothing of it
        assert [
            i for i in find_leftovers(trials, trials, trials, proc) if i.tag == "0badc0de"
        ] == []


def test_host_wide_files_of_a_tag_without_trace_are_left_alone(tmp_path: Path) -> None:
    trials, logs, temp = tmp_path / "trials", tmp_path / "logs", tmp_path / "tmp"
    for root in (trials, logs, temp, tmp_path / "proc"):
        root.mkdir()
    (logs / "harness-vm-0badc0de.log").write_bytes(b"")  # a live libvirt trial's log elsewhere
    (temp / "harness-trial-0badc0de-ab12cd34").mkdir()
    assert [
        i for i in find_leftovers(trials, temp, logs, tmp_path / "proc") if i.tag == "0badc0de"
    ] == []


def test_a_root_inside_another_roots_path_is_not_a_trace(tmp_path: Path) -> None:
    # /t/a names no trial of /s/t/a: the path must start the argument (or follow = : ,).
    mine, proc = tmp_path / "a", tmp_path / "proc"
    mine.mkdir()
    theirs = Path(f"{tmp_path}/outer{mine}")
    _fake_qemu(proc, 10, "-name", "guest=harness-vm-0badc0de", "-drive",
               f"file={theirs}/harness-vm-0badc0de-Ab_12cd3/overlay.qcow2")  # fmt: skip
    assert [i for i in find_leftovers(mine, mine, mine, proc) if i.tag == "0badc0de"] == []
    found = find_leftovers(theirs, theirs, theirs, proc)
    assert ("qemu_process", "10") in {(i.kind, i.name) for i in found}
