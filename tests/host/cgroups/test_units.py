"""Pure parts of the cgroup mechanism: mount parsing, selection, names, readings, spawn."""

import os
from pathlib import Path

import pytest

from host.cgroups import CgroupError, Reading, choose, spawn_in_cgroup
from host.cgroups.fileio import parse_keyed
from host.cgroups.memory import headroom, working_set
from host.cgroups.mounts import parse_mountinfo
from host.cgroups.names import validate_name, validate_prefix
from host.cgroups.v1 import V1Hierarchy, memory_write_order
from host.cgroups.v2 import V2Hierarchy
from tests.host.cgroups.v2_imitation import ImitationV2Tree

HYBRID = """\
25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
32 31 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 31 0:30 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
36 31 0:31 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd,xattr
37 31 0:32 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

V2_ONLY = """\
29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
40 29 0:26 / /mnt/odd\\040place rw shared:4 - cgroup2 cgroup2 rw
"""


def test_parse_hybrid_mountinfo() -> None:
    mounts = {m.key: m for m in parse_mountinfo(HYBRID)}
    assert set(mounts) == {"cpu", "cpuacct", "memory", "pids", "name=systemd", "unified"}
    assert mounts["memory"].mount_point == Path("/sys/fs/cgroup/memory")
    assert mounts["memory"].version == "v1"
    assert mounts["unified"].version == "v2"
    assert mounts["name=systemd"].controllers == frozenset({"name=systemd"})


def test_parse_v2_only_mountinfo_first_mount_wins_and_escapes() -> None:
    mounts = parse_mountinfo(V2_ONLY)
    assert [(m.key, m.mount_point) for m in mounts] == [("unified", Path("/sys/fs/cgroup"))]
    other = parse_mountinfo(V2_ONLY.splitlines()[1])
    assert other[0].mount_point == Path("/mnt/odd place")


def test_choose_prefers_v1_memory_in_hybrid() -> None:
    h = choose(parse_mountinfo(HYBRID))
    assert isinstance(h, V1Hierarchy)
    assert h.version == "v1"


def test_choose_v2_when_unified_offers_memory(tmp_path: Path) -> None:
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2")
    line = f"29 23 0:26 / {tree.root} rw - cgroup2 cgroup2 rw\n"
    assert isinstance(choose(parse_mountinfo(line)), V2Hierarchy)
    (tree.root / "cgroup.controllers").write_text("cpu pids\n")
    with pytest.raises(CgroupError) as err:
        choose(parse_mountinfo(line))
    assert err.value.category == "no_memory_controller"


def test_choose_v1_memory_even_when_unified_offers_memory(tmp_path: Path) -> None:
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2")
    line = f"29 23 0:26 / {tree.root} rw - cgroup2 cgroup2 rw\n"
    assert isinstance(choose(parse_mountinfo(line + HYBRID)), V1Hierarchy)


def test_choose_nothing_mounted() -> None:
    with pytest.raises(CgroupError) as err:
        choose(())
    assert err.value.category == "no_memory_controller"


def test_names() -> None:
    assert validate_name("trial-01_a") == "trial-01_a"
    for bad in ("", ".", "..", "a/b", "a b", "Trial", "-x", "x" * 65, "é"):
        with pytest.raises(CgroupError):
            validate_name(bad)
    assert validate_prefix("") == ""
    with pytest.raises(CgroupError):
        validate_prefix("../")


def test_memory_write_order() -> None:
    assert memory_write_order(1 << 62, 64 << 20)[0] == "memory.limit_in_bytes"
    assert memory_write_order(64 << 20, 128 << 20)[0] == "memory.memsw.limit_in_bytes"


def test_reading_invariants() -> None:
    with pytest.raises(ValueError, match="present"):
        Reading("present")
    with pytest.raises(ValueError, match="absent"):
        Reading("absent", value=1)
    with pytest.raises(ValueError, match="unread"):
        Reading("unread")


def test_derived_readings_never_guess() -> None:
    usage, inactive = Reading.present(100), Reading.present(30)
    assert working_set(usage, inactive) == Reading.present(70)
    assert working_set(Reading.present(10), inactive) == Reading.present(0)
    assert working_set(usage, Reading.unread("read_failed")).state == "unread"
    assert headroom(Reading.present(200), Reading.present(70)) == Reading.present(130)
    assert headroom(Reading.absent(), Reading.present(70)) == Reading.absent()
    assert headroom(Reading.unread("read_failed"), Reading.present(70)).state == "unread"
    assert headroom(Reading.present(200), Reading.unread("parse_failed")).state == "unread"


def test_parse_keyed_refuses_ambiguity() -> None:
    assert parse_keyed("a 1\nb 2\n") == {"a": 1, "b": 2}
    for bad in ("a 1\na 2\n", "a\n", "a x\n", "a 1 2\n"):
        with pytest.raises(CgroupError):
            parse_keyed(bad)


def test_spawn_fails_closed_when_joining_fails(tmp_path: Path) -> None:
    # cgroup.procs replaced by /dev/full: the child's join write fails (ENOSPC), so
    # the child must never exec its program.
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2")
    tree.make_parent()
    cg = V2Hierarchy(tree.root, dir_ops=tree.dir_ops()).create("trial-one")
    procs = tree.root / "harness" / "trial-one" / "cgroup.procs"
    procs.unlink()
    procs.symlink_to("/dev/full")
    marker = tmp_path / "ran-outside"
    with pytest.raises(CgroupError) as err:
        spawn_in_cgroup(cg, ["touch", str(marker)])
    assert err.value.category == "spawn_failed"
    assert not marker.exists()


def test_the_file_system_type_decides_not_the_mount_source() -> None:
    """After the separator come the type, the source and the super options; the source is
    free text (`mount -t cgroup2 none ...`). Mutation control: reading the type one field
    later (the source) finds no cgroup mount here."""
    text = (
        "34 31 0:29 / /sys/fs/cgroup/memory rw - cgroup none rw,memory\n"
        "37 31 0:32 / /sys/fs/cgroup/unified rw - cgroup2 none rw\n"
    )
    mounts = {m.key: (m.version, m.mount_point) for m in parse_mountinfo(text)}
    assert mounts == {
        "memory": ("v1", Path("/sys/fs/cgroup/memory")),
        "unified": ("v2", Path("/sys/fs/cgroup/unified")),
    }


def test_an_unread_reading_keeps_the_reason_it_was_unread_for() -> None:
    """The first unread input's reason is passed on, and a working set that is absent
    (not unread) gives `counter_missing`. Mutation control: either `or` of the reason
    chains as `and` loses the reason or names the wrong one."""
    unread = Reading.unread("parse_failed")
    assert headroom(Reading.absent(), unread) == unread
    assert headroom(Reading.unread("read_failed"), unread) == Reading.unread("read_failed")
    assert headroom(Reading.present(5), Reading.absent()) == Reading.unread("counter_missing")
    assert working_set(Reading.absent(), unread) == unread
    assert working_set(Reading.absent(), Reading.absent()) == Reading.unread("counter_missing")


def test_parse_keyed_names_its_file_or_none() -> None:
    """Mutation control: `interface_file=name or None` as `name and None` drops the name."""
    with pytest.raises(CgroupError) as err:
        parse_keyed("a 1\na 2\n", controller="memory", name="memory.stat")
    assert (err.value.category, err.value.interface_file) == ("parse_failed", "memory.stat")
    with pytest.raises(CgroupError) as err:
        parse_keyed("a\n")
    assert err.value.interface_file is None


def test_an_error_s_text_is_its_category_and_where() -> None:
    """What a log line shows: the category, then controller/file when known. Mutation
    control: the `if where` negated prints an empty `()` or drops the place."""
    assert str(CgroupError("parse_failed")) == "parse_failed"
    where = CgroupError("parse_failed", controller="memory", interface_file="memory.stat")
    assert str(where) == "parse_failed (memory/memory.stat)"


def _v1_tmp(tmp_path: Path) -> tuple[V1Hierarchy, Path]:
    """A v1 hierarchy of plain directories: create and rmdir are plain mkdir/rmdir."""
    lines = "".join(
        f"{30 + i} 25 0:{40 + i} / {tmp_path / c} rw - cgroup cgroup rw,{c}\n"
        for i, c in enumerate(("cpu", "memory", "pids"))
    )
    for controller in ("cpu", "memory", "pids"):
        (tmp_path / controller).mkdir()
    hierarchy = choose(parse_mountinfo(lines))
    assert isinstance(hierarchy, V1Hierarchy)
    return hierarchy, tmp_path


def test_v1_create_makes_the_cgroup_in_each_controller_s_own_hierarchy(tmp_path: Path) -> None:
    """Each controller's directory is under its own mount, and a second cgroup under the
    same (existing) parent is fine. Mutation control: choose's `controller in
    mount.controllers` negated maps every controller to the first mount; the parent's
    `mkdir(exist_ok=True)` as False refuses the second cgroup."""
    hierarchy, root = _v1_tmp(tmp_path)
    for name in ("a", "b"):
        hierarchy.create(name)
        for controller in ("cpu", "memory", "pids"):
            assert (root / controller / "harness" / name).is_dir(), (controller, name)
    assert sorted(p.name for p in (root / "cpu" / "harness").iterdir()) == ["a", "b"]


def test_v1_create_that_fails_halfway_is_write_rejected_and_undone(tmp_path: Path) -> None:
    """memory is made first; cpu's mount point is then not a directory (ENOTDIR): the
    category is write_rejected and memory's directory is removed again. Mutation
    control: create's `except OSError` made dead lets NotADirectoryError escape."""
    hierarchy, root = _v1_tmp(tmp_path)
    (root / "cpu").rmdir()
    (root / "cpu").write_text("")
    with pytest.raises(CgroupError) as err:
        hierarchy.create("a")
    assert (err.value.category, err.value.controller) == ("write_rejected", "cpu")
    assert not (root / "memory" / "harness" / "a").exists()


def test_a_v1_cgroup_needs_the_memory_controller(tmp_path: Path) -> None:
    """Mutation control: `"memory" not in dirs` negated refuses every v1 cgroup."""
    from host.cgroups.v1 import V1Cgroup

    with pytest.raises(CgroupError) as err:
        V1Cgroup("a", {"cpu": tmp_path})
    assert err.value.category == "no_memory_controller"
    assert V1Cgroup("a", {"memory": tmp_path}).name == "a"


def test_v1_create_skips_a_controller_that_is_not_mounted(tmp_path: Path) -> None:
    """Without a cpu hierarchy, memory and pids are still made. Mutation control: the
    `continue` for an unmounted controller as `break` stops before pids."""
    lines = "".join(
        f"{30 + i} 25 0:{40 + i} / {tmp_path / c} rw - cgroup cgroup rw,{c}\n"
        for i, c in enumerate(("memory", "pids"))
    )
    for controller in ("memory", "pids"):
        (tmp_path / controller).mkdir()
    hierarchy = choose(parse_mountinfo(lines))
    hierarchy.create("a")
    assert (tmp_path / "memory/harness/a").is_dir()
    assert (tmp_path / "pids/harness/a").is_dir()


def test_v1_memory_limit_on_plain_files(tmp_path: Path) -> None:
    """The v1 interface files imitated by plain files (write then read back is exact):
    both limits are written and swap is 0; without memory.memsw the answer is
    swap_accounting_missing. Mutation control: the memsw path built with `*` for `/`
    raises TypeError; `swap_bytes=0` as 1 is reported wrong."""
    from host.cgroups.readings import MemoryLimitApplied, PidsLimitApplied

    hierarchy, root = _v1_tmp(tmp_path)
    cg = hierarchy.create("a")
    memory = root / "memory/harness/a"
    with pytest.raises(CgroupError) as err:
        cg.set_memory_limit(64 << 20)
    assert err.value.category == "swap_accounting_missing"
    for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
        (memory / name).write_text("9223372036854771712\n")
    assert cg.set_memory_limit(64 << 20) == MemoryLimitApplied(limit_bytes=64 << 20, swap_bytes=0)
    assert (memory / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (memory / "memory.memsw.limit_in_bytes").read_text() == str(64 << 20)
    (root / "pids/harness/a/pids.max").write_text("max\n")
    assert cg.set_pids_limit(100) == PidsLimitApplied(max_pids=100)
    assert (root / "pids/harness/a/pids.max").read_text() == "100"


def test_v1_join_descriptors_and_a_member_blocking_removal(tmp_path: Path) -> None:
    """One write descriptor per controller's cgroup.procs for a child to join by; a
    listed member makes remove `not_empty`. Mutation control: the descriptor loop made
    empty returns none; remove's procs path built with `*` raises TypeError."""
    hierarchy, root = _v1_tmp(tmp_path)
    cg = hierarchy.create("a")
    for controller in ("cpu", "memory", "pids"):
        (root / controller / "harness/a/cgroup.procs").write_text("")
    fds = cg.procs_fds_for_preexec()
    try:
        assert len(fds) == 3
        for fd in fds:  # open for writing: the child joins by writing through them
            assert os.write(fd, b"0") == 1
    finally:
        for fd in fds:
            os.close(fd)
    (root / "memory/harness/a/cgroup.procs").write_text(f"{os.getpid()}\n")
    with pytest.raises(CgroupError) as err:
        cg.remove()
    assert err.value.category == "not_empty"


def test_mount_lines_with_too_few_fields_are_parse_failed() -> None:
    """A line with the separator but fewer than six fields before it, or fewer than three
    after it, is no mount table line the kernel writes. Mutation control: `sep < 6 or
    len(fields) < sep + 4` with `and`, or with `sep - 4`, accepts one of these."""
    for line in (
        "34 31 0:29 / /sys/fs/cgroup/memory - cgroup cgroup rw,memory",  # 5 before
        "34 31 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup",  # 2 after
    ):
        with pytest.raises(CgroupError) as err:
            parse_mountinfo(line + "\n")
        assert (err.value.category, err.value.interface_file) == ("parse_failed", "mountinfo")


def test_an_unreadable_mount_table_is_read_failed(tmp_path: Path) -> None:
    """Mutation control: read_mounts' `except OSError` made dead lets it escape."""
    from host.cgroups.mounts import read_mounts

    with pytest.raises(CgroupError) as err:
        read_mounts(tmp_path / "mountinfo")
    assert err.value.category == "read_failed"


def test_a_parent_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    """`harness` as a symlink to a directory is not the harness parent: absent. Mutation
    control: `is_dir(follow_symlinks=False)` as True lists the target's children."""
    from host.cgroups.listing import list_children

    (tmp_path / "elsewhere" / "trial-a").mkdir(parents=True)
    (tmp_path / "harness").symlink_to(tmp_path / "elsewhere")
    assert list_children(tmp_path, "harness", "").state == "absent"


def test_a_child_that_is_a_symlink_is_not_listed(tmp_path: Path) -> None:
    """Only real directories under the parent are cgroups. Mutation control: the
    children's `is_dir(follow_symlinks=False)` as True lists the symlink."""
    from host.cgroups.listing import list_children

    (tmp_path / "harness" / "trial-a").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "harness" / "trial-b").symlink_to(tmp_path / "elsewhere")
    listing = list_children(tmp_path, "harness", "trial-")
    assert (listing.state, listing.names) == ("present", ("trial-a",))


def test_a_limit_at_exactly_the_no_limit_value_is_absent(tmp_path: Path) -> None:
    """At or above 2**62 is no limit (receipts/kernelfacts.py); one less is a limit.
    Mutation control: `value >= CGROUP_UNLIMITED` as `>` reads 2**62 as a limit."""
    from host.cgroups.memory import read_limit

    path = tmp_path / "memory.limit_in_bytes"
    path.write_text(f"{1 << 62}\n")
    assert read_limit(path) == Reading.absent()
    path.write_text(f"{(1 << 62) - 1}\n")
    assert read_limit(path) == Reading.present((1 << 62) - 1)


def test_lines_that_are_no_mount_do_not_end_the_table() -> None:
    """A line without the separator field is skipped, and the mounts after it are read.
    Mutation control: its `continue` as `break` loses them."""
    mounts = parse_mountinfo("no separator here\n" + HYBRID)
    assert "memory" in {m.key for m in mounts}


def test_spawn_closes_its_join_descriptors(tmp_path: Path) -> None:
    """Mutation control: spawn_in_cgroup's closing loop made empty leaks them."""
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2")
    tree.make_parent()
    cg = V2Hierarchy(tree.root, dir_ops=tree.dir_ops()).create("trial-one")
    before = sorted(os.listdir("/proc/self/fd"))
    child = spawn_in_cgroup(cg, ["true"])
    assert child.wait(timeout=30) == 0
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_v1_join_read_back_and_open_on_plain_files(tmp_path: Path) -> None:
    """add_process writes the pid to every controller's cgroup.procs and reads each back;
    a cgroup.procs where the write does not take (here /dev/null) is `not_in_cgroup`, for
    add_process and add_process_to alike; open finds an existing cgroup and not a missing
    one; oom_kills reads memory.oom_control. Mutation control: either loop of
    add_process or of add_process_to made empty, add_process_to's path built with `*`,
    open's `not any(...)` without the `not`, and oom_kills' path with `*` each fail."""
    hierarchy, root = _v1_tmp(tmp_path)
    cg = hierarchy.create("a")
    for controller in ("cpu", "memory", "pids"):
        (root / controller / "harness/a/cgroup.procs").write_text("")
    cg.add_process(os.getpid())
    assert cg.member_pids() == (os.getpid(),)
    (root / "pids/harness/a/cgroup.procs").write_text("")
    cg.add_process_to(("pids",), os.getpid())
    assert (root / "pids/harness/a/cgroup.procs").read_text() == str(os.getpid())
    pids_procs = root / "pids/harness/a/cgroup.procs"
    pids_procs.unlink()
    pids_procs.symlink_to("/dev/null")
    for join in (cg.add_process, lambda pid: cg.add_process_to(("pids",), pid)):
        with pytest.raises(CgroupError) as err:
            join(os.getpid())
        assert (err.value.category, err.value.controller) == ("not_in_cgroup", "pids")
    assert hierarchy.open("a").name == "a"
    with pytest.raises(CgroupError) as err:
        hierarchy.open("b")
    assert err.value.category == "not_found"
    (root / "memory/harness/a/memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    )
    assert cg.oom_kills() == Reading.present(3)


def test_a_v1_mount_without_controllers_does_not_end_the_table() -> None:
    """A cgroup mount whose super options are only flags (rw, xattr) names no hierarchy
    and is skipped; the mounts after it are read. Mutation control: its `continue` as
    `break` loses them."""
    line = "40 31 0:40 / /sys/fs/cgroup/x rw - cgroup cgroup rw,xattr\n"
    assert "memory" in {m.key for m in parse_mountinfo(line + HYBRID)}


def test_choose_passes_v1_mounts_on_its_way_to_the_unified_one(tmp_path: Path) -> None:
    """A v1 hierarchy without memory listed before the unified mount: v2 is chosen.
    Mutation control: the v2 loop's `continue` for a v1 mount as `break` finds none."""
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2")
    lines = (
        "32 31 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
        f"29 23 0:26 / {tree.root} rw - cgroup2 cgroup2 rw\n"
    )
    assert isinstance(choose(parse_mountinfo(lines)), V2Hierarchy)


def test_spawn_runs_then_in_the_child_only_when_given(tmp_path: Path) -> None:
    """Mutation control: `then is not None` negated (or as `is None`) skips `then`, or
    calls None in the child (spawn_failed)."""
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2")
    tree.make_parent()
    cg = V2Hierarchy(tree.root, dir_ops=tree.dir_ops()).create("trial-one")
    marker = tmp_path / "then-ran"
    child = spawn_in_cgroup(cg, ["true"], then=marker.touch)
    assert child.wait(timeout=30) == 0
    assert marker.exists()
    assert spawn_in_cgroup(cg, ["true"]).wait(timeout=30) == 0


def test_v1_readings_and_cpu_quota_on_plain_files(tmp_path: Path) -> None:
    """Every v1 memory reading from its own file, and the cpu quota written to both
    files. Mutation control: any of their paths built with `*` for `/` raises."""
    from host.cgroups.readings import CpuQuotaApplied

    hierarchy, root = _v1_tmp(tmp_path)
    cg = hierarchy.create("a")
    memory = root / "memory/harness/a"
    files = {
        "memory.limit_in_bytes": str(64 << 20),
        "memory.usage_in_bytes": str(40 << 20),
        "memory.max_usage_in_bytes": str(50 << 20),
        "memory.memsw.limit_in_bytes": str(64 << 20),
        "memory.stat": f"total_inactive_file {10 << 20}\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    }
    for name, text in files.items():
        (memory / name).write_text(text)
    readings = cg.read_memory()
    assert (readings.limit, readings.usage, readings.peak) == (
        Reading.present(64 << 20),
        Reading.present(40 << 20),
        Reading.present(50 << 20),
    )
    assert readings.working_set == Reading.present(30 << 20)
    assert readings.headroom == Reading.present(34 << 20)
    assert readings.oom_kills == Reading.present(0)
    assert cg.memsw_limit() == Reading.present(64 << 20)
    cpu = root / "cpu/harness/a"
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    assert cg.set_cpu_quota(50_000, 100_000) == CpuQuotaApplied(quota_us=50_000, period_us=100_000)
    assert (cpu / "cpu.cfs_quota_us").read_text() == "50000"


def test_a_v1_rmdir_that_fails_other_than_busy_is_remove_failed(tmp_path: Path) -> None:
    """Plain directories holding an empty cgroup.procs cannot be removed (ENOTEMPTY, where
    cgroupfs would remove them): remove_failed, and only EBUSY is not_empty. Mutation
    control: `err.errno == errno.EBUSY` negated answers not_empty."""
    hierarchy, root = _v1_tmp(tmp_path)
    cg = hierarchy.create("a")
    for controller in ("cpu", "memory", "pids"):
        (root / controller / "harness/a/cgroup.procs").write_text("")
    with pytest.raises(CgroupError) as err:
        cg.remove()
    assert err.value.category == "remove_failed"


def test_v1_without_a_cpu_hierarchy_lists_and_joins_the_others(tmp_path: Path) -> None:
    """A controller that is not mounted is left out of the membership files (not looked
    up); and when one join descriptor cannot be opened, those already opened are closed.
    Mutation control: `c in self._dirs and ...is_dir()` as `or` raises KeyError; the
    closing loop of procs_fds_for_preexec made empty leaks a descriptor."""
    lines = "".join(
        f"{30 + i} 25 0:{40 + i} / {tmp_path / c} rw - cgroup cgroup rw,{c}\n"
        for i, c in enumerate(("memory", "pids"))
    )
    for controller in ("memory", "pids"):
        (tmp_path / controller).mkdir()
    cg = choose(parse_mountinfo(lines)).create("a")
    (tmp_path / "memory/harness/a/cgroup.procs").write_text(f"{os.getpid()}\n")
    (tmp_path / "pids/harness/a/cgroup.procs").write_text("")
    assert cg.member_pids() == (os.getpid(),)
    (tmp_path / "pids/harness/a/cgroup.procs").unlink()
    before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(CgroupError) as err:
        cg.procs_fds_for_preexec()
    assert err.value.category == "spawn_failed"
    assert sorted(os.listdir("/proc/self/fd")) == before
