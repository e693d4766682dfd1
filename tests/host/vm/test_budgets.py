"""Budgets read where a process runs: which cgroup per controller, and the tightest
limit over its ancestors (libvirt sets the domain-wide CPU quota one level above
QEMU's `emulator` cgroup). Fake trees here; the conformance suite reads live QEMUs."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import pytest

from host.cgroups import Cgroup
from host.cgroups.mounts import CgroupMount
from host.vm.budgets import (
    BudgetUnread,
    _ancestry,
    _dirs_of,
    _where,
    cgroup_dirs,
    memory_limit_of,
    memory_record_readings,
    tightest_cpu_millicores,
    tightest_pids_max,
)
from host.vm.errors import VmError
from host.vm.libvirt_backend import LibvirtVm
from host.vm.process import sandbox_options, seccomp_mode
from tests.host.vm.support import spec

V1 = (
    CgroupMount("v1", "cpu,cpuacct", frozenset({"cpu", "cpuacct"}), Path("/c/cpu")),
    CgroupMount("v1", "memory", frozenset({"memory"}), Path("/c/memory")),
    CgroupMount("v1", "pids", frozenset({"pids"}), Path("/c/pids")),
    CgroupMount("v2", "unified", frozenset(), Path("/c/unified")),
)
LIBVIRT_QEMU = """9:name=systemd:/
8:pids:/harness/trial-x
4:memory:/machine/qemu-1-d.libvirt-qemu
2:cpu,cpuacct:/machine/qemu-1-d.libvirt-qemu/emulator
0::/machine/qemu-1-d.libvirt-qemu/emulator
"""


def test_cgroup_dirs_per_controller_and_unified() -> None:
    dirs = cgroup_dirs(LIBVIRT_QEMU, V1)
    domain = Path("/c/cpu/machine/qemu-1-d.libvirt-qemu")
    assert dirs["cpu"] == (domain / "emulator", Path("/c/cpu"))
    assert dirs["cpuacct"] == dirs["cpu"]  # co-mounted: one directory for both
    assert dirs["memory"] == (Path("/c/memory/machine/qemu-1-d.libvirt-qemu"), Path("/c/memory"))
    assert dirs["pids"] == (Path("/c/pids/harness/trial-x"), Path("/c/pids"))
    assert dirs["unified"][0] == Path("/c/unified/machine/qemu-1-d.libvirt-qemu/emulator")
    with pytest.raises(BudgetUnread):
        cgroup_dirs("no colons here", V1)


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_cpu_limit_is_the_tightest_ancestor(tmp_path: Path, v1: bool) -> None:
    """libvirt's layout: no limit on `emulator`, the domain-wide quota on its parent."""

    def cpu(quota: str) -> dict[str, str]:
        if v1:
            return {"cpu.cfs_quota_us": quota, "cpu.cfs_period_us": "100000"}
        return {"cpu.max": f"{'max' if quota == '-1' else quota} 100000"}

    files = {f"machine/d/emulator/{k}": v for k, v in cpu("-1").items()}
    files |= {f"machine/d/{k}": v for k, v in cpu("200000").items()}
    files |= {f"machine/{k}": v for k, v in cpu("350000").items()}
    _tree(tmp_path, files)
    emulator = tmp_path / "machine" / "d" / "emulator"
    assert tightest_cpu_millicores(emulator, tmp_path, v1) == 2000
    assert tightest_cpu_millicores(tmp_path / "machine", tmp_path, v1) == 3500
    unlimited = {f"machine/d/{k}": v for k, v in cpu("-1").items()}
    unlimited |= {f"machine/{k}": v for k, v in cpu("-1").items()}
    _tree(tmp_path, unlimited)
    assert tightest_cpu_millicores(emulator, tmp_path, v1) is None
    _tree(tmp_path, {f"machine/d/{k}": v for k, v in cpu("garbage").items()})
    with pytest.raises(BudgetUnread):
        tightest_cpu_millicores(emulator, tmp_path, v1)


def test_pids_limit_is_the_tightest_ancestor(tmp_path: Path) -> None:
    _tree(tmp_path, {"h/t/pids.max": "max", "h/pids.max": "512"})
    assert tightest_pids_max(tmp_path / "h" / "t", tmp_path) == 512
    _tree(tmp_path, {"h/t/pids.max": "64"})
    assert tightest_pids_max(tmp_path / "h" / "t", tmp_path) == 64
    _tree(tmp_path, {"h/t/pids.max": "max", "h/pids.max": "max"})
    assert tightest_pids_max(tmp_path / "h" / "t", tmp_path) is None
    _tree(tmp_path, {"h/pids.max": "-3"})
    with pytest.raises(BudgetUnread):
        tightest_pids_max(tmp_path / "h" / "t", tmp_path)


def test_ancestry_stops_at_the_hierarchy_root(tmp_path: Path) -> None:
    """A limit above the mount point is not this hierarchy's: never read."""
    _tree(tmp_path, {"pids.max": "7", "mnt/t/pids.max": "max"})
    assert tightest_pids_max(tmp_path / "mnt" / "t", tmp_path / "mnt") is None


def test_memory_record_readings_v1_and_v2(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    _tree(v1, {"memory.max_usage_in_bytes": "4096", "memory.oom_control": "oom_kill 2"})
    _tree(v2, {"memory.peak": "8192", "memory.events": "oom 1\noom_kill 1"})
    peak, oom = memory_record_readings(v1)
    assert (peak.value, oom.value) == (4096, 2)
    peak, oom = memory_record_readings(v2)
    assert (peak.value, oom.value) == (8192, 1)
    peak, oom = memory_record_readings(tmp_path / "gone")  # libvirt removed it: unread
    assert peak.state == oom.state == "unread"


def test_live_process_reads_and_missing_process() -> None:
    """This process's own memory cgroup reads as a limit or unlimited; a PID that does
    not exist is unread, never unlimited."""
    limit = memory_limit_of(os.getpid())
    assert limit is None or limit > 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(BudgetUnread):
        memory_limit_of(gone.pid)


def _wait_for_exec(pid: int) -> None:
    """Until the child has exec'd: before that, /proc shows the forking parent's argv."""
    deadline = time.monotonic() + 10
    while b"-sandbox" not in Path(f"/proc/{pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the child did not exec"
        time.sleep(0.01)


def test_sandbox_options_and_seccomp_mode_of_a_live_process() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(30)",
            "-sandbox",
            "on,a=b",
            "-sandbox",
            "off",
        ]
    )
    try:
        _wait_for_exec(child.pid)
        assert sandbox_options(child.pid) == ["on,a=b", "off"]
        assert seccomp_mode(child.pid) == 0  # a plain process has no filter
    finally:
        child.kill()
        child.wait()
    assert sandbox_options(child.pid) == [] and seccomp_mode(child.pid) is None


def test_libvirt_vm_refuses_a_qemu_without_our_filter(tmp_path: Path) -> None:
    """What the libvirt backend checks on its paused QEMU, on a process whose argv
    carries libvirt's default filter (spawn=deny) and no filter in the kernel."""
    libvirt_default = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "-sandbox", libvirt_default]
    )
    try:
        _wait_for_exec(child.pid)
        vm = LibvirtVm(spec(object(), cast(Cgroup, None), tmp_path))
        vm.pid = child.pid
        with pytest.raises(VmError) as err:
            vm._check_sandbox()
        assert err.value.category == "qemu_start_failed"
    finally:
        child.kill()
        child.wait()


def test_the_unified_path_comes_only_from_the_unified_line() -> None:
    """The v2 path is the one on the `0::` line, wherever that line is; a v1 line never
    names it. A path may hold a colon: only the first two separate fields."""
    dirs = cgroup_dirs("0::/mine:with-colon\n4:memory:/elsewhere\n", V1)
    assert dirs["unified"] == (Path("/c/unified/mine:with-colon"), Path("/c/unified"))
    assert dirs["memory"] == (Path("/c/memory/elsewhere"), Path("/c/memory"))


def test_a_v1_controller_without_its_file_falls_back_to_unified(tmp_path: Path) -> None:
    """Where a controller's v1 directory lacks the limit file (the controller is bound to
    v2), the unified hierarchy holds it; with neither, the budget is unread."""
    v1_dir, unified = tmp_path / "v1", tmp_path / "unified"
    v1_dir.mkdir()
    unified.mkdir()
    dirs = {"memory": (v1_dir, tmp_path), "unified": (unified, tmp_path)}
    assert _where(dirs, "memory", "memory.limit_in_bytes") == (unified, tmp_path, False)
    (v1_dir / "memory.limit_in_bytes").write_text("1\n")
    assert _where(dirs, "memory", "memory.limit_in_bytes") == (v1_dir, tmp_path, True)
    with pytest.raises(BudgetUnread):
        _where({"cpu": (v1_dir, tmp_path)}, "cpu", "cpu.cfs_quota_us")


_LIMIT_PROBE = r"""
import os, subprocess, sys
from host.vm import budgets
pid = os.getpid()
dirs = budgets._dirs_of(pid)
def hide(key):
    # An empty tmpfs over that hierarchy's mount: its limit files are ours to write.
    directory, root = dirs[key]
    subprocess.run(["mount", "-t", "tmpfs", "none", str(root)], check=True)
    directory.mkdir(parents=True, exist_ok=True)
    return directory
for version, memory, swap in [line.split() for line in sys.stdin.read().splitlines()]:
    if version == "v1":
        if "memory" not in dirs:
            continue
        d = hide("memory")
        (d / "memory.limit_in_bytes").write_text(memory + "\n")
        if swap != "-":  # "-": no file (v1 without swap accounting)
            (d / "memory.memsw.limit_in_bytes").write_text(swap + "\n")
    else:
        if "unified" not in dirs:
            continue
        if "memory" in dirs:
            hide("memory")  # no v1 memory file: the unified hierarchy holds memory
        d = hide("unified")
        (d / "memory.max").write_text(memory + "\n")
        if swap != "-":
            (d / "memory.swap.max").write_text(swap + "\n")
    answers = []
    for read in (budgets.memory_limit_of, budgets.swap_limit_of):
        try:
            answers.append(str(read(pid)))
        except budgets.BudgetUnread:
            answers.append("unread")
    print(version, memory, swap, *answers)
"""

MIB = 1 << 20
UNLIMITED_V1 = str(1 << 62)  # receipts.kernelfacts.CGROUP_UNLIMITED: v1's "no limit"
LIMIT_CASES = [
    ("v1", str(MIB), str(3 * MIB), str(MIB), str(2 * MIB)),  # swap is memsw's excess
    ("v1", UNLIMITED_V1, UNLIMITED_V1, "None", "None"),
    ("v1", str(MIB), UNLIMITED_V1, str(MIB), "None"),
    ("v1", "junk", str(MIB), "unread", "unread"),
    ("v1", str(MIB), "junk", str(MIB), "unread"),
    ("v1", str(MIB), "-", str(MIB), "unread"),
    ("v2", str(MIB), str(2 * MIB), str(MIB), str(2 * MIB)),  # swap is its own limit
    ("v2", "max", "max", "None", "None"),
    ("v2", str(MIB), "max", str(MIB), "None"),
    ("v2", "junk", "junk", "unread", "unread"),
    ("v2", str(MIB), "-", str(MIB), "unread"),
]


def test_memory_and_swap_limits_are_read_where_the_process_is() -> None:
    """memory_limit_of and swap_limit_of read this process's own cgroup; here each
    hierarchy's mount is covered by an empty tmpfs (in a private user and mount
    namespace: nothing on the host changes) holding the limit files of each case. Every
    cgroup version this host mounts is checked."""
    present = _dirs_of(os.getpid())
    versions = {"v1"} if "memory" in present else set()
    versions |= {"v2"} if "unified" in present else set()
    assert versions
    for case in LIMIT_CASES:  # each in its own namespace: no case sees another's files
        proc = subprocess.run(
            ["unshare", "-rm", sys.executable, "-c", _LIMIT_PROBE],
            input=" ".join(case[:3]) + "\n",
            cwd=Path(__file__).resolve().parents[3],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == (list(case) if case[0] in versions else []), case


def test_a_directory_outside_the_hierarchy_is_read_alone(tmp_path: Path) -> None:
    """A cgroup directory not under the mount root (a stale or moved path) is read by
    itself: the walk never climbs above the hierarchy."""
    inside = tmp_path / "x" / "y"
    walked = list(itertools.islice(_ancestry(inside, tmp_path / "other"), 10))
    assert walked == [inside]
    assert list(_ancestry(inside, tmp_path)) == [inside, inside.parent, tmp_path]


@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
def test_a_zero_cpu_period_is_unread_and_a_period_of_one_is_read(tmp_path: Path, v1: bool) -> None:
    def write(quota: str, period: str) -> None:
        if v1:
            _tree(tmp_path, {"cpu.cfs_quota_us": quota, "cpu.cfs_period_us": period})
        else:
            _tree(tmp_path, {"cpu.max": f"{quota} {period}"})

    write("5", "0")
    with pytest.raises(BudgetUnread):
        tightest_cpu_millicores(tmp_path, tmp_path, v1)
    write("5", "1")
    assert tightest_cpu_millicores(tmp_path, tmp_path, v1) == 5000
