"""Staging within one process: where a filled stage may go, what the sweep may remove,
and what cleanup may not hide (receipts/staging.py).

Why apart from test_staging.py (real filler processes): these are the refusals and
modes a single filler meets, each of which a mutation would otherwise leave unguarded.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from receipts import staging
from receipts.staging import (
    TargetExists,
    fill_lock,
    lock_path_for,
    remove_if_dead,
    staged_directory,
    staged_file,
    staged_unnamed,
)


def test_an_unnamed_stage_moves_into_an_absent_or_empty_target(tmp_path: Path) -> None:
    """The content is renamed to its target when that is absent or an empty directory,
    and the staging directory is gone after the block."""
    (tmp_path / "empty").mkdir()
    for name in ("absent", "empty"):
        with staged_unnamed(tmp_path) as stage:
            (stage.content / "file").write_text(name)
            target = stage.move_into(name)
        assert target == tmp_path / name and (target / "file").read_text() == name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["absent", "empty"]


@pytest.mark.parametrize("kind", ["full", "symlink"])
def test_an_unnamed_stage_never_replaces_a_target(tmp_path: Path, kind: str) -> None:
    """A non-empty target, or a symlink (even to an empty directory), is refused: the
    content stays staged and is removed with the stage."""
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "entry"
    if kind == "full":
        target.mkdir()
        (target / "old").write_text("kept")
    else:
        target.symlink_to(tmp_path / "elsewhere")
    with staged_unnamed(tmp_path) as stage, pytest.raises(TargetExists):
        stage.move_into("entry")
    assert not any(staging.is_staging_name(p.name) for p in tmp_path.iterdir())
    assert kind == "symlink" or (target / "old").read_text() == "kept"


def test_a_target_filled_during_the_rename_is_target_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another filler creating the target between the check and the rename makes the
    rename fail with ENOTEMPTY: that is `TargetExists` (the caller adopts), not an
    OSError of its own."""
    target = tmp_path / "entry"
    real_rename = Path.rename

    def racing(self: Path, to: Path) -> Path:
        Path(to).mkdir()
        (Path(to) / "theirs").write_text("first")
        return real_rename(self, to)

    monkeypatch.setattr(Path, "rename", racing)
    with pytest.raises(TargetExists), staged_directory(target) as content:
        (content / "ours").write_text("second")
    assert [p.name for p in target.iterdir()] == ["theirs"]


def test_another_rename_failure_is_not_called_target_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only ENOTEMPTY/EEXIST mean someone else filled the target; any other failure of
    the rename (here EXDEV) is raised as it is."""

    def failing(self: Path, to: Path) -> Path:
        raise OSError(errno.EXDEV, "cross-device")

    monkeypatch.setattr(Path, "rename", failing)
    with pytest.raises(OSError) as info, staged_directory(tmp_path / "entry") as content:
        (content / "f").write_text("x")
    assert info.value.errno == errno.EXDEV and not isinstance(info.value, TargetExists)


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """Under umask 0 the mode a file is created with is the mode seen, so a mode one
    bit off is caught whatever bits the usual umask (022) would have cleared."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("umask_zero")
def test_a_staged_directory_is_readable_by_everyone(tmp_path: Path) -> None:
    """Entries are made 0755: other users of the machine (the trial's unprivileged
    processes) read the cache, nobody else writes it."""
    with staged_directory(tmp_path / "entry") as content:
        (content / "f").write_text("x")
    with staged_unnamed(tmp_path) as stage:
        moved = stage.move_into("unnamed")
    assert (tmp_path / "entry").stat().st_mode & 0o777 == 0o755
    assert moved.stat().st_mode & 0o777 == 0o755


def test_cleanup_does_not_hide_the_filler_s_own_error(tmp_path: Path) -> None:
    """The staging directory is removed whatever ended the block, and a failure to
    remove it (here: already gone) never replaces the error that ended it."""
    with (
        pytest.raises(ValueError, match="the filler's own"),
        staged_directory(tmp_path / "entry") as content,
    ):
        shutil.rmtree(content.parent)
        raise ValueError("the filler's own error")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_the_sweep_leaves_what_is_not_a_staging_directory(tmp_path: Path, kind: str) -> None:
    """A staging-named symlink (to a directory somebody owns) or file is not a staging
    directory: the sweep leaves it and what it points at, and says it removed nothing."""
    owned = tmp_path / "owned"
    owned.mkdir()
    (owned / "data").write_text("keep")
    path = tmp_path / ".entry.staging-x"
    if kind == "symlink":
        path.symlink_to(owned)
    else:
        path.write_text("not a directory")
    assert remove_if_dead(path) is False
    assert os.path.lexists(path) and (owned / "data").read_text() == "keep"


@pytest.mark.usefixtures("umask_zero")
def test_a_fill_lock_file_is_its_owner_s_alone(tmp_path: Path) -> None:
    """The lock file is made 0600: another user cannot open it, so cannot hold the lock
    and stall every fill of that entry."""
    target = tmp_path / "entry"
    with fill_lock(target):
        pass
    assert lock_path_for(target).stat().st_mode & 0o777 == 0o600


def test_the_sweep_removes_only_this_target_s_staging(tmp_path: Path) -> None:
    """Entering a stage sweeps dead staging directories of *this* target only: the
    other entries beside it, another target's dead staging, and unrelated names stay."""
    for name in ("other-entry", ".other.staging-dead", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / ".entry.staging-dead").mkdir()  # this target's, its filler gone
    with staged_directory(tmp_path / "entry") as content:
        (content / "f").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".other.staging-dead",
        "entry",
        "notes",
        "other-entry",
    ]


def test_a_live_filler_s_staging_is_not_removed(tmp_path: Path) -> None:
    """A staging directory whose lock is held (here by another open file of this
    process, as a live filler's would be) is left, and the sweep says so."""
    path = tmp_path / ".entry.staging-live"
    path.mkdir()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert remove_if_dead(path) is False
        assert path.is_dir()
    finally:
        os.close(fd)
    assert remove_if_dead(path) is True and not path.exists()


@pytest.mark.parametrize("kind", ["full", "symlink"])
def test_a_taken_target_is_refused_before_any_work(tmp_path: Path, kind: str) -> None:
    """A target that is a non-empty directory or a symlink (even to an empty one) is
    refused before the block runs: nothing is converted only to be thrown away."""
    target = tmp_path / "entry"
    if kind == "full":
        target.mkdir()
        (target / "old").write_text("kept")
    else:
        (tmp_path / "empty").mkdir()
        target.symlink_to(tmp_path / "empty")
    ran = []
    with pytest.raises(TargetExists), staged_directory(target):
        ran.append(True)
    assert ran == []


@pytest.mark.parametrize("kind", ["file", "dangling_symlink"])
def test_a_staged_file_s_taken_target_is_refused_before_any_work(tmp_path: Path, kind: str) -> None:
    """`staged_file` refuses a target that exists, or is a symlink even to nothing,
    before the block runs (the no-clobber link would refuse it only after the write)."""
    target = tmp_path / "suite.zip"
    if kind == "file":
        target.write_text("kept")
    else:
        target.symlink_to(tmp_path / "nowhere")
    ran = []
    with pytest.raises(TargetExists), staged_file(target):
        ran.append(True)
    assert ran == []
    assert kind != "file" or target.read_text() == "kept"


def test_staging_names_are_recognised_by_either_form() -> None:
    """A staging directory is a dot-name with `.staging-<random>` in it (per filler) or
    ending `.staging` (the old shared name); anything else is not one."""
    assert staging.is_staging_name(".entry.staging-x1y2")
    assert staging.is_staging_name(".entry.staging")
    assert not staging.is_staging_name("entry.staging-x1y2")
    assert not staging.is_staging_name(".entry")
    assert not staging.is_staging_name(".entry.lock")


def test_a_staging_directory_removed_by_another_sweep_meanwhile_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two fillers sweeping at once: the directory vanishes between the check and the
    open. That is not an error of this sweep (it removed nothing)."""
    path = tmp_path / ".entry.staging-gone"
    path.mkdir()
    real_open = os.open

    def racing(target: object, flags: int, *args: object) -> int:
        if Path(str(target)) == path:
            path.rmdir()  # the other sweep got there first
        return real_open(target, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", racing)
    assert remove_if_dead(path) is False


def test_a_fill_lock_makes_the_directories_it_needs(tmp_path: Path) -> None:
    """A first fill on an empty machine: the cache root and its subdirectories do not
    exist yet, and taking the lock makes them (every level)."""
    target = tmp_path / "cache" / "models" / "entry"
    with fill_lock(target):
        assert lock_path_for(target).is_file()


def test_a_fill_lock_never_follows_a_link_planted_at_its_path(tmp_path: Path) -> None:
    """A symlink at the lock's path (planted to make the harness create or lock a file
    elsewhere) is refused (ELOOP), and nothing is created where it points."""
    target = tmp_path / "entry"
    elsewhere = tmp_path / "elsewhere"
    lock_path_for(target).symlink_to(elsewhere)
    with pytest.raises(OSError) as info, fill_lock(target):
        pass
    assert info.value.errno == errno.ELOOP
    assert not elsewhere.exists()
