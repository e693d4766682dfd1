"""The v2 implementation against an IMITATION of the cgroup2 file layout.

This host cannot mount a v2 memory controller (memory is bound to v1), so these tests
drive `V2Hierarchy`/`V2Cgroup` over plain files in a temporary directory laid out as
cgroupfs lays them out (see `v2_imitation.py` for what the imitation does not do).
They prove which files are written, in what form, what is read back, and how
readings are derived; they do not prove that a kernel enforces anything.
"""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from host.cgroups import CgroupError
from host.cgroups.v2 import DirOps, V2Cgroup, V2Hierarchy
from tests.host.cgroups.v2_imitation import MIB, ImitationProcsPruner, ImitationV2Tree


@pytest.fixture
def imitation(tmp_path: Path) -> ImitationV2Tree:
    return ImitationV2Tree(tmp_path / "imitation-cgroup2")


@pytest.fixture
def hierarchy(imitation: ImitationV2Tree) -> V2Hierarchy:
    imitation.make_parent()
    return V2Hierarchy(imitation.root, dir_ops=imitation.dir_ops())


def _cg(hierarchy: V2Hierarchy, name: str = "trial-one") -> V2Cgroup:
    return hierarchy.create(name)


def test_create_and_list(hierarchy: V2Hierarchy, imitation: ImitationV2Tree) -> None:
    cg = _cg(hierarchy)
    assert cg.version == "v2"
    assert (imitation.root / "harness" / "trial-one" / "memory.max").is_file()
    assert hierarchy.list_names("trial").keys() == {"unified"}
    assert hierarchy.list_names("trial")["unified"].names == ("trial-one",)
    with pytest.raises(CgroupError) as err:
        hierarchy.create("trial-one")
    assert err.value.category == "already_exists"


def test_parent_absent_is_absent_not_unread(imitation: ImitationV2Tree) -> None:
    h = V2Hierarchy(imitation.root, dir_ops=imitation.dir_ops())
    assert h.list_names()["unified"].state == "absent"


def test_listing_unreadable_root_is_unread(tmp_path: Path) -> None:
    h = V2Hierarchy(tmp_path / "no-such-mount")
    listing = h.list_names()["unified"]
    assert listing.state == "unread"
    assert listing.reason == "read_failed"


def test_subtree_control_write_that_did_not_take(imitation: ImitationV2Tree) -> None:
    # The parent is made by `create` here, so its subtree_control starts empty and the
    # `+memory +cpu +pids` write lands as plain bytes: the enabled set reads back wrong.
    h = V2Hierarchy(imitation.root, dir_ops=imitation.dir_ops())
    with pytest.raises(CgroupError) as err:
        h.create("trial-one")
    assert err.value.category == "readback_mismatch"
    assert not (imitation.root / "harness" / "trial-one").exists()


def test_no_memory_controller(imitation: ImitationV2Tree) -> None:
    (imitation.root / "cgroup.controllers").write_text("cpu io pids\n")
    h = V2Hierarchy(imitation.root, dir_ops=imitation.dir_ops())
    with pytest.raises(CgroupError) as err:
        h.create("trial-one")
    assert err.value.category == "no_memory_controller"


def test_memory_limit_writes_max_and_swap_zero(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    cg = _cg(hierarchy)
    applied = cg.set_memory_limit(64 * MIB)
    assert (applied.limit_bytes, applied.swap_bytes) == (64 * MIB, 0)
    d = imitation.root / "harness" / "trial-one"
    assert (d / "memory.max").read_text() == str(64 * MIB)
    assert (d / "memory.swap.max").read_text() == "0"
    assert cg.swap_limit().value == 0
    assert cg.memory_limit().value == 64 * MIB


def test_swap_accounting_missing(tmp_path: Path) -> None:
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2", with_swap=False)
    tree.make_parent()
    cg = V2Hierarchy(tree.root, dir_ops=tree.dir_ops()).create("trial-one")
    with pytest.raises(CgroupError) as err:
        cg.set_memory_limit(64 * MIB)
    assert err.value.category == "swap_accounting_missing"
    assert (tree.root / "harness" / "trial-one" / "memory.max").read_text() == "max\n"


def test_value_that_did_not_take(hierarchy: V2Hierarchy, imitation: ImitationV2Tree) -> None:
    # A sink that accepts every write and reads back nothing, as a kernel file that
    # silently ignored the write would.
    swap = imitation.root / "harness" / "trial-one" / "memory.swap.max"
    cg = _cg(hierarchy)
    swap.unlink()
    swap.symlink_to("/dev/null")
    with pytest.raises(CgroupError) as err:
        cg.set_memory_limit(64 * MIB)
    assert err.value.category == "readback_mismatch"
    assert err.value.interface_file == "memory.swap.max"


def test_cpu_and_pids(hierarchy: V2Hierarchy, imitation: ImitationV2Tree) -> None:
    cg = _cg(hierarchy)
    assert cg.set_cpu_quota(50_000, 100_000).quota_us == 50_000
    assert cg.set_pids_limit(128).max_pids == 128
    d = imitation.root / "harness" / "trial-one"
    assert (d / "cpu.max").read_text() == "50000 100000"
    assert (d / "pids.max").read_text() == "128"


def test_controller_missing_in_child(imitation: ImitationV2Tree) -> None:
    parent = imitation.make_parent()
    (parent / "cgroup.subtree_control").write_text("memory\n")
    (imitation.root / "cgroup.subtree_control").write_text("memory\n")
    (imitation.root / "cgroup.controllers").write_text("memory\n")
    cg = V2Hierarchy(imitation.root, dir_ops=imitation.dir_ops()).create("trial-one")
    with pytest.raises(CgroupError) as err:
        cg.set_cpu_quota(50_000, 100_000)
    assert err.value.category == "controller_missing"
    with pytest.raises(CgroupError) as err:
        cg.set_pids_limit(10)
    assert err.value.category == "controller_missing"


def _write(d: Path, **files: str) -> None:
    for name, text in files.items():
        (d / name.replace("_", ".", 1)).write_text(text)


def test_readings_derive_working_set_and_headroom(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    cg = _cg(hierarchy)
    d = imitation.root / "harness" / "trial-one"
    (d / "memory.max").write_text(f"{64 * MIB}\n")
    (d / "memory.current").write_text(f"{50 * MIB}\n")
    (d / "memory.peak").write_text(f"{60 * MIB}\n")
    (d / "memory.stat").write_text(f"anon {40 * MIB}\nfile 1\ninactive_file {10 * MIB}\n")
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 4\noom_kill 3\n")
    r = cg.read_memory()
    assert r.version == "v2"
    assert r.usage.value == 50 * MIB
    assert r.peak.value == 60 * MIB
    assert r.inactive_file.value == 10 * MIB
    assert r.working_set.value == 40 * MIB
    assert r.headroom.value == 24 * MIB
    assert r.oom_kills.value == 3
    (d / "memory.max").write_text("max\n")
    assert cg.read_memory().headroom.state == "absent"


def test_peak_missing_is_unread(tmp_path: Path) -> None:
    tree = ImitationV2Tree(tmp_path / "imitation-cgroup2", with_peak=False)
    tree.make_parent()
    cg = V2Hierarchy(tree.root, dir_ops=tree.dir_ops()).create("trial-one")
    peak = cg.memory_peak()
    assert peak.state == "unread"
    assert peak.reason == "interface_file_missing"


def test_unreadable_stat_is_unread_not_absent(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    cg = _cg(hierarchy)
    d = imitation.root / "harness" / "trial-one"
    (d / "memory.max").write_text(f"{64 * MIB}\n")
    (d / "memory.stat").unlink()
    (d / "memory.stat").mkdir()  # open succeeds, read fails with EISDIR
    r = cg.read_memory()
    assert r.usage.state == "present"
    assert (r.inactive_file.state, r.inactive_file.reason) == ("unread", "read_failed")
    assert r.working_set.state == "unread"
    assert r.headroom.state == "unread"
    (d / "memory.events").write_text("oom 1\n")
    assert (cg.oom_kills().state, cg.oom_kills().reason) == ("unread", "counter_missing")
    (d / "memory.events").write_text("oom_kill 1\noom_kill 2\n")
    assert (cg.oom_kills().state, cg.oom_kills().reason) == ("unread", "parse_failed")


def test_kill_members_and_remove(hierarchy: V2Hierarchy, imitation: ImitationV2Tree) -> None:
    cg = _cg(hierarchy)
    d = imitation.root / "harness" / "trial-one"
    children = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    try:
        (d / "cgroup.procs").write_text("".join(f"{c.pid}\n" for c in children))
        assert cg.member_pids() == tuple(sorted(c.pid for c in children))
        with pytest.raises(CgroupError) as err:
            cg.remove()
        assert err.value.category == "not_empty"
        with ImitationProcsPruner(d / "cgroup.procs"):
            assert cg.kill_members(deadline_s=5.0) == 3
        assert (d / "cgroup.kill").read_text() == "1"
        assert cg.member_pids() == ()
        assert [c.wait(timeout=5) for c in children] == [-signal.SIGKILL] * 3
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()
    cg.remove()
    assert not d.exists()
    assert hierarchy.list_names()["unified"].names == ()


def test_kill_members_deadline(hierarchy: V2Hierarchy, imitation: ImitationV2Tree) -> None:
    # Without the pruner nothing leaves the imitation's cgroup.procs: the deadline ends it.
    cg = _cg(hierarchy)
    child = subprocess.Popen(["sleep", "60"])
    try:
        (imitation.root / "harness" / "trial-one" / "cgroup.procs").write_text(f"{child.pid}\n")
        with pytest.raises(CgroupError) as err:
            cg.kill_members(deadline_s=0.2)
        assert err.value.category == "members_remain"
        assert child.wait(timeout=5) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_pid_not_listed_is_not_signalled(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    # A pid that left cgroup.procs between two reads is not signalled: here the pid is
    # listed while the first read happens and is gone for the confirmation read.
    from host.cgroups.members import _signal_listed

    cg = _cg(hierarchy)
    procs = imitation.root / "harness" / "trial-one" / "cgroup.procs"
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        procs.write_text("")
        _signal_listed([("memory", procs)], [bystander.pid])
        with pytest.raises(subprocess.TimeoutExpired):
            bystander.wait(timeout=0.3)
        assert cg.member_pids() == ()
    finally:
        bystander.kill()
        bystander.wait()
    assert os.path.exists(procs)


def test_add_process_to_one_controller_is_impossible_on_v2(hierarchy: V2Hierarchy) -> None:
    """One hierarchy for all controllers: a process cannot be ours for pids only."""
    cg = _cg(hierarchy)
    with pytest.raises(CgroupError) as err:
        cg.add_process_to(("pids",), os.getpid())
    assert err.value.category == "controller_missing"


def test_add_process_to_names_the_first_controller_asked_for(hierarchy: V2Hierarchy) -> None:
    """Mutation control: `controllers[0]` as `controllers[-1]` names the last."""
    cg = _cg(hierarchy)
    with pytest.raises(CgroupError) as err:
        cg.add_process_to(("pids", "memory"), os.getpid())
    assert (err.value.category, err.value.controller) == ("controller_missing", "pids")


def test_a_cgroup_the_kernel_will_not_remove_is_remove_failed(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    """rmdir refused (a child cgroup left inside: EBUSY) is `remove_failed`, not an
    OSError. Mutation control: remove's `except OSError` made dead lets it escape."""
    cg = _cg(hierarchy)
    imitation.mkdir(imitation.root / "harness" / "trial-one" / "child")
    with pytest.raises(CgroupError) as err:
        cg.remove()
    assert err.value.category == "remove_failed"
    assert cg.exists()


def test_a_cgroup_removed_by_someone_else_meanwhile_is_removed(
    imitation: ImitationV2Tree,
) -> None:
    """rmdir finding the directory already gone (another remover won the race) is no
    failure. Mutation control: remove's `except FileNotFoundError` made dead turns it
    into remove_failed."""

    def rmdir_after_another(path: Path) -> None:
        imitation.rmdir(path)  # the other remover
        raise FileNotFoundError(2, "No such file or directory")

    imitation.make_parent()
    hierarchy = V2Hierarchy(
        imitation.root, dir_ops=DirOps(mkdir=imitation.mkdir, rmdir=rmdir_after_another)
    )
    cg = _cg(hierarchy)
    cg.remove()
    assert not cg.exists()


def test_v2_join_read_back_descriptors_and_open(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    """add_process writes the pid and reads it back (a cgroup.procs where the write does
    not take, /dev/null, is not_in_cgroup); the join descriptor is writable; open finds
    the cgroup and not a missing one. Mutation control: the procs path built with `*`,
    the read-back's `not` negated, `O_WRONLY | O_CLOEXEC` as `&`, open's path with `*`."""
    cg = _cg(hierarchy)
    cg.add_process(os.getpid())
    assert cg.member_pids() == (os.getpid(),)
    (fd,) = cg.procs_fds_for_preexec()
    try:
        assert os.write(fd, b"0") == 1
    finally:
        os.close(fd)
    assert hierarchy.open("trial-one").name == "trial-one"
    with pytest.raises(CgroupError) as err:
        hierarchy.open("trial-two")
    assert err.value.category == "not_found"
    procs = imitation.root / "harness" / "trial-one" / "cgroup.procs"
    procs.unlink()
    procs.symlink_to("/dev/null")
    with pytest.raises(CgroupError) as err:
        cg.add_process(os.getpid())
    assert err.value.category == "not_in_cgroup"


def test_a_v2_create_whose_child_lacks_memory_is_undone(imitation: ImitationV2Tree) -> None:
    """The child came up without the memory controller: controller_missing, and the
    directory made for it is removed again. Mutation control: create's `except
    CgroupError` made dead leaves the directory behind."""

    def mkdir_without_memory(path: Path) -> None:
        imitation.mkdir(path)
        if path.name == "trial-one":
            (path / "cgroup.controllers").write_text("cpu pids\n")

    imitation.make_parent()
    hierarchy = V2Hierarchy(
        imitation.root, dir_ops=DirOps(mkdir=mkdir_without_memory, rmdir=imitation.rmdir)
    )
    with pytest.raises(CgroupError) as err:
        hierarchy.create("trial-one")
    assert (err.value.category, err.value.controller) == ("controller_missing", "memory")
    assert not (imitation.root / "harness" / "trial-one").exists()


def test_a_v2_mkdir_the_kernel_refuses_is_write_rejected(imitation: ImitationV2Tree) -> None:
    """mkdir failing with anything but EEXIST or a permission error (here ENOSPC: the
    cgroup limit on descendants) is write_rejected. Mutation control: create's last
    `except OSError` made dead lets it escape."""

    def mkdir_refused(path: Path) -> None:
        if path.name == "trial-one":
            raise OSError(28, "No space left on device")
        imitation.mkdir(path)

    imitation.make_parent()
    hierarchy = V2Hierarchy(
        imitation.root, dir_ops=DirOps(mkdir=mkdir_refused, rmdir=imitation.rmdir)
    )
    with pytest.raises(CgroupError) as err:
        hierarchy.create("trial-one")
    assert err.value.category == "write_rejected"


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (FileExistsError(17, "File exists"), None),
        (PermissionError(13, "Permission denied"), "permission_denied"),
        (OSError(28, "No space left on device"), "write_rejected"),
    ],
)
def test_making_the_harness_parent_maps_each_mkdir_failure(
    imitation: ImitationV2Tree, error: OSError, category: str | None
) -> None:
    """The parent made by someone else meanwhile (EEXIST after they made it) is fine;
    EACCES is permission_denied; anything else write_rejected. Mutation control: each of
    _prepare_parent's three handlers made dead lets its error escape."""

    def mkdir(path: Path) -> None:
        if path.name == "harness":
            if isinstance(error, FileExistsError):
                imitation.make_parent()  # the other creator
            raise error
        imitation.mkdir(path)

    hierarchy = V2Hierarchy(imitation.root, dir_ops=DirOps(mkdir=mkdir, rmdir=imitation.rmdir))
    if category is None:
        assert hierarchy.create("trial-one").name == "trial-one"
        return
    with pytest.raises(CgroupError) as err:
        hierarchy.create("trial-one")
    assert err.value.category == category


def test_a_v2_join_descriptor_that_cannot_be_opened_is_spawn_failed(
    hierarchy: V2Hierarchy, imitation: ImitationV2Tree
) -> None:
    """Mutation control: procs_fds_for_preexec's `except OSError` made dead lets it escape."""
    cg = _cg(hierarchy)
    (imitation.root / "harness" / "trial-one" / "cgroup.procs").unlink()
    with pytest.raises(CgroupError) as err:
        cg.procs_fds_for_preexec()
    assert err.value.category == "spawn_failed"
