"""host/release.py: every release says what it read, the same way for every caller."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, cast

from host.cgroups.errors import CgroupError
from host.release import release_cgroup, remove_dir, remove_files, stop_process


class _BrokenCgroup:
    """A cgroup whose files cannot be written (what a stale or foreign cgroup does)."""

    def kill_members(self) -> None:
        raise CgroupError("write_rejected")

    def remove(self) -> None:
        raise AssertionError("not reached")

    def exists(self) -> bool:
        raise AssertionError("not reached")


def test_a_cgroup_that_errors_is_unread_not_still_present() -> None:
    """The three copies disagreed here (`unread` in two, `still_present` in one)."""
    result = release_cgroup(cast(Any, _BrokenCgroup()))
    assert (result.resource, result.status, result.evidence) == ("cgroup", "failed", "unread")


def test_a_removed_tree_is_proved_absent(tmp_path: Path) -> None:
    tree = tmp_path / "scratch"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("x")
    (tree / "link").symlink_to(tmp_path / "elsewhere")
    result = remove_dir(tree, "trial_scratch")
    assert (result.resource, result.status, result.evidence) == (
        "trial_scratch",
        "confirmed",
        "directory_absent",
    )
    assert not tree.exists()


def test_a_path_that_cannot_be_read_is_unread() -> None:
    """A name the kernel refuses to look up (ENAMETOOLONG): absence was never read."""
    result = remove_dir(Path("/tmp") / ("n" * 300), "scratch_dir")
    assert (result.status, result.evidence) == ("failed", "unread")


def test_files_and_a_dangling_link_are_removed(tmp_path: Path) -> None:
    key, link = tmp_path / "key", tmp_path / "authorized_keys"
    key.write_text("k")
    link.symlink_to(tmp_path / "missing")
    result = remove_files((key, link), "ssh_keys")
    assert (result.status, result.evidence) == ("confirmed", "file_absent")
    assert not link.is_symlink()


def test_a_live_process_is_stopped_and_proved_gone() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        result = stop_process(child.pid, "qemu_process", 10.0)
        assert (result.status, result.evidence) == ("confirmed", "process_gone")
    finally:
        child.kill()
        child.wait()
