"""Stage, then rename (STANDARDS.md §5).

An artifact other steps trust is written into a sibling staging directory and moved into
place with one atomic step. A non-empty target is refused; a stale staging directory left
by a killed run is removed by the next one; any exception, Ctrl-C included, removes the
partial. The staging name is derived from the target, so the next run finds the stale one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


class TargetExists(FileExistsError):
    """The target is already there: staged artifacts never overwrite."""


def staging_dir_for(target: Path) -> Path:
    return target.parent / f".{target.name}.staging"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged_file(target: Path) -> Iterator[Path]:
    """Yield a path to write; on success it becomes `target` by an atomic no-clobber link."""
    target = target.absolute()
    if target.exists() or target.is_symlink():
        raise TargetExists(target.name)
    staging = staging_dir_for(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700, parents=False)
    staged = staging / target.name
    try:
        yield staged
        with staged.open("rb") as handle:
            os.fsync(handle.fileno())
        try:
            os.link(staged, target)  # atomic, and fails with EEXIST instead of replacing
        except FileExistsError as exc:
            raise TargetExists(target.name) from exc
        _fsync_dir(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield a directory to fill; on success it is renamed to `target` (absent or empty)."""
    target = target.absolute()
    if target.is_symlink() or (target.exists() and any(target.iterdir())):
        raise TargetExists(target.name)
    staging = staging_dir_for(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700, parents=False)
    content = staging / "content"
    content.mkdir(mode=0o755)
    try:
        yield content
        if target.exists():
            target.rmdir()  # empty by the check above; rmdir fails if it was filled since
        content.rename(target)
        _fsync_dir(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
