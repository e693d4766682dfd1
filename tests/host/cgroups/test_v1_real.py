"""Real cgroups on this host (cgroup v1 hybrid: memory with memsw, cpu, pids).

These tests write to /sys/fs/cgroup; every cgroup they make is removed by the
`real_hierarchy` fixture.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from host.cgroups import Cgroup, CgroupError, CgroupHierarchy, spawn_in_cgroup
from host.cgroups.fileio import write_verified
from host.cgroups.mounts import read_mounts
from host.vm.budgets import pids_limit_of

pytestmark = pytest.mark.integration

MIB = 1 << 20


def _v1_dir(controller: str, parent: str, name: str) -> Path:
    for mount in read_mounts():
        if mount.version == "v1" and controller in mount.controllers:
            return mount.mount_point / parent / name
    raise AssertionError(f"no v1 {controller} mount")


def _read(path: Path) -> str:
    return path.read_text().strip()


def test_this_host_is_v1(real_hierarchy: CgroupHierarchy) -> None:
    assert real_hierarchy.version == "v1"


def test_create_limit_read_back_remove(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy, cg_prefix: str
) -> None:
    cg = make_cgroup("limits")
    parent = real_hierarchy.parent
    mem = _v1_dir("memory", parent, cg.name)
    cpu = _v1_dir("cpu", parent, cg.name)
    pids = _v1_dir("pids", parent, cg.name)
    assert mem.is_dir()
    assert cpu.is_dir()
    assert pids.is_dir()

    applied = cg.set_memory_limit(128 * MIB)
    assert (applied.limit_bytes, applied.swap_bytes) == (128 * MIB, 0)
    assert _read(mem / "memory.limit_in_bytes") == str(128 * MIB)
    assert _read(mem / "memory.memsw.limit_in_bytes") == str(128 * MIB)
    assert cg.memory_limit().value == 128 * MIB

    quota = cg.set_cpu_quota(50_000, 100_000)
    assert (quota.quota_us, quota.period_us) == (50_000, 100_000)
    assert _read(cpu / "cpu.cfs_quota_us") == "50000"
    assert _read(cpu / "cpu.cfs_period_us") == "100000"

    assert cg.set_pids_limit(64).max_pids == 64
    assert _read(pids / "pids.max") == "64"

    listed = real_hierarchy.list_names(cg_prefix)
    assert set(listed) == {"memory", "cpu", "pids"}
    assert all(cg.name in listing.names for listing in listed.values())

    cg.remove()
    assert not mem.exists()
    assert not cpu.exists()
    assert not pids.exists()
    assert not cg.exists()
    assert all(cg.name not in lst.names for lst in real_hierarchy.list_names(cg_prefix).values())


def test_memory_limit_lowered_and_raised_keeps_memsw_equal(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy
) -> None:
    cg = make_cgroup("order")
    mem = _v1_dir("memory", real_hierarchy.parent, cg.name)
    for limit in (256 * MIB, 64 * MIB, 512 * MIB, 128 * MIB):
        cg.set_memory_limit(limit)
        assert _read(mem / "memory.limit_in_bytes") == str(limit)
        assert _read(mem / "memory.memsw.limit_in_bytes") == str(limit)


def test_invalid_values_are_refused_before_writing(
    make_cgroup: Callable[[str], Cgroup],
) -> None:
    cg = make_cgroup("invalid")
    for bad in (0, -4096, 1_000_001, 1 << 62):
        with pytest.raises(CgroupError) as err:
            cg.set_memory_limit(bad)
        assert err.value.category == "invalid_value"
    with pytest.raises(CgroupError) as err:
        cg.set_cpu_quota(500, 100_000)
    assert err.value.category == "invalid_value"
    with pytest.raises(CgroupError) as err:
        cg.set_pids_limit(0)
    assert err.value.category == "invalid_value"
    assert cg.memory_limit().state == "absent"


def test_kernel_refusal_and_value_that_did_not_take_get_their_categories(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy
) -> None:
    cg = make_cgroup("kernel")
    mem = _v1_dir("memory", real_hierarchy.parent, cg.name)
    cg.set_memory_limit(64 * MIB)
    # memsw below the memory limit: the kernel refuses (EINVAL).
    with pytest.raises(CgroupError) as err:
        write_verified(mem / "memory.memsw.limit_in_bytes", str(32 * MIB), controller="memory")
    assert err.value.category == "write_rejected"
    # An unaligned limit is accepted by the kernel but stored rounded down.
    with pytest.raises(CgroupError) as err:
        write_verified(mem / "memory.limit_in_bytes", "1000001", controller="memory")
    assert err.value.category == "readback_mismatch"


def test_create_twice_and_bad_names(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy, cg_prefix: str
) -> None:
    make_cgroup("twice")
    with pytest.raises(CgroupError) as err:
        real_hierarchy.create(cg_prefix + "twice")
    assert err.value.category == "already_exists"
    for bad in ("", "..", "a/b", "A", "x" * 65, "1abc"):
        with pytest.raises(CgroupError) as err:
            real_hierarchy.create(bad)
        assert err.value.category == "invalid_name"
    with pytest.raises(CgroupError) as err:
        real_hierarchy.open(cg_prefix + "never-made")
    assert err.value.category == "not_found"


def test_spawned_child_is_a_member_before_it_runs(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy
) -> None:
    cg = make_cgroup("spawn")
    # The child reports its own cgroup membership as its first act.
    child = spawn_in_cgroup(cg, ["cat", "/proc/self/cgroup"], stdout=subprocess.PIPE)
    out, _ = child.communicate(timeout=10)
    lines = out.decode().splitlines()
    want = f"/{real_hierarchy.parent}/{cg.name}"
    for controller in ("memory", "cpu", "pids"):
        assert any(
            line.split(":")[1].split(",").count(controller) and line.endswith(want)
            for line in lines
        ), (controller, lines)


def test_oom_kill_is_counted(make_cgroup: Callable[[str], Cgroup]) -> None:
    cg = make_cgroup("oom")
    cg.set_memory_limit(64 * MIB)
    assert cg.oom_kills().value == 0
    hog = (
        "import sys\nb = []\n"
        "for _ in range(512):\n    b.append(b'x' * (1 << 20))\n"
        "sys.exit(3)\n"  # reached only if 512 MiB fit: the limit did not hold
    )
    child = spawn_in_cgroup(cg, [sys.executable, "-c", hog])
    assert child.wait(timeout=10) == -signal.SIGKILL
    readings = cg.read_memory()
    assert readings.oom_kills.state == "present"
    assert readings.oom_kills.value is not None
    assert readings.oom_kills.value >= 1
    assert readings.peak.value is not None
    assert 32 * MIB < readings.peak.value <= 64 * MIB
    assert readings.limit.value == 64 * MIB


def test_read_memory_with_a_live_member(make_cgroup: Callable[[str], Cgroup]) -> None:
    cg = make_cgroup("readings")
    cg.set_memory_limit(256 * MIB)
    child = spawn_in_cgroup(
        cg, [sys.executable, "-c", "import time; b = b'x' * (16 << 20); time.sleep(30)"]
    )
    try:
        deadline = time.monotonic() + 5
        while (cg.memory_usage().value or 0) < 16 * MIB and time.monotonic() < deadline:
            time.sleep(0.05)
        r = cg.read_memory()
        for reading in (r.limit, r.usage, r.peak, r.inactive_file, r.working_set, r.headroom):
            assert reading.state == "present", r
        assert r.usage.value is not None
        assert r.usage.value >= 16 * MIB
        assert r.working_set.value is not None
        assert r.inactive_file.value is not None
        assert r.working_set.value == max(0, r.usage.value - r.inactive_file.value)
        assert r.headroom.value == 256 * MIB - r.working_set.value
        assert r.oom_kills.value == 0
    finally:
        cg.kill_members()
        child.wait(timeout=5)


def test_kill_members_empties_cgroup_procs(make_cgroup: Callable[[str], Cgroup]) -> None:
    cg = make_cgroup("kill")
    inside = spawn_in_cgroup(cg, ["sh", "-c", "sleep 60 & sleep 60 & wait"])
    moved = subprocess.Popen(["sleep", "60"])
    cg.add_process(moved.pid)
    deadline = time.monotonic() + 5
    while len(cg.member_pids()) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(cg.member_pids()) == 4  # sh, two sleeps, the moved sleep
    assert cg.kill_members(deadline_s=5.0) >= 4
    assert cg.member_pids() == ()
    assert inside.wait(timeout=5) == -signal.SIGKILL
    assert moved.wait(timeout=5) == -signal.SIGKILL
    cg.remove()
    assert not cg.exists()


def test_remove_refuses_while_members_remain(make_cgroup: Callable[[str], Cgroup]) -> None:
    cg = make_cgroup("busy")
    child = spawn_in_cgroup(cg, ["sleep", "60"])
    try:
        with pytest.raises(CgroupError) as err:
            cg.remove()
        assert err.value.category == "not_empty"
        assert cg.exists()
    finally:
        cg.kill_members()
        child.wait(timeout=5)
    cg.remove()
    assert not cg.exists()


def test_remove_is_all_or_nothing(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy
) -> None:
    # A member in the pids hierarchy only: no directory may be removed, not even the
    # memory one whose cgroup.procs is empty.
    cg = make_cgroup("partial")
    dirs = [_v1_dir(c, real_hierarchy.parent, cg.name) for c in ("memory", "cpu", "pids")]
    child = subprocess.Popen(["sleep", "60"])
    try:
        (dirs[2] / "cgroup.procs").write_text(str(child.pid))
        with pytest.raises(CgroupError) as err:
            cg.remove()
        assert err.value.category == "not_empty"
        assert all(d.is_dir() for d in dirs)
    finally:
        child.kill()
        child.wait(timeout=5)
    cg.remove()
    assert not any(d.exists() for d in dirs)


def test_add_process_of_missing_pid(make_cgroup: Callable[[str], Cgroup]) -> None:
    cg = make_cgroup("nopid")
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(CgroupError) as err:
        cg.add_process(gone.pid)
    assert err.value.category == "process_not_found"
    assert os.getpid() not in cg.member_pids()


def test_add_process_to_one_controller_leaves_the_others(
    make_cgroup: Callable[[str], Cgroup], real_hierarchy: CgroupHierarchy
) -> None:
    """What the libvirt backend does to QEMU: ours for pids, the memory and cpu cgroups
    another manager put it in stay as they were; then its pids budget binds it."""
    cg = make_cgroup("pidsonly")
    cg.set_pids_limit(3)
    child = subprocess.Popen(["sleep", "60"])
    before = Path(f"/proc/{child.pid}/cgroup").read_text().splitlines()
    try:
        cg.add_process_to(("pids",), child.pid)
        after = Path(f"/proc/{child.pid}/cgroup").read_text().splitlines()
        changed = [line for line in after if line not in before]
        assert changed == [line for line in after if ":pids:" in line]
        assert changed[0].endswith(f":pids:/{real_hierarchy.parent}/{cg.name}")
        assert child.pid in cg.member_pids()
        memory_procs = _v1_dir("memory", real_hierarchy.parent, cg.name) / "cgroup.procs"
        assert str(child.pid) not in _read(memory_procs).split()
        assert pids_limit_of(child.pid) == 3
    finally:
        cg.kill_members()
        child.wait(timeout=5)
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(CgroupError) as err:
        cg.add_process_to(("pids",), gone.pid)
    assert err.value.category == "process_not_found"
