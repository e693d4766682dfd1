"""Stage, then rename (docs/engineering.md §5), safe when several processes fill one cache.

An artifact other steps trust is written into a sibling staging directory and moved into
place with one atomic step. A non-empty target is refused; any exception, Ctrl-C
included, removes the partial.

Two set-ups at once (two clones, two trials) may fill the same content-keyed entry, so:
- every filler stages into a directory of its own (`.<target>.staging-<random>`) and
  holds an exclusive `flock` on that directory's descriptor while it lives. The kernel
  drops the lock when the process dies however it dies (SIGKILL included), so a
  staging sibling whose lock can be taken is a dead filler's leftover and is removed;
  one whose lock is held belongs to a live filler and is left alone. Creating a staging
  directory and sweeping stale ones both happen under a short lock on the parent
  directory, so a sweep never sees a staging directory before its owner has locked it.
- callers wrap check-adopt-or-build in `fill_lock(target)`, a blocking per-target lock:
  the second filler waits (and says so on stderr: a wheel build takes minutes), then
  finds the entry and adopts it. One build, not two.
Locks are close-on-exec descriptors, so a build tool we start never inherits (and so
never prolongs) them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

_LEGACY_SUFFIX = ".staging"  # the single, shared staging name used before per-filler names


class TargetExists(FileExistsError):
    """The target is already there: staged artifacts never overwrite."""


def staging_prefix(target: Path) -> str:
    """Every staging directory of `target` is named `<prefix><random>`."""
    return f".{target.name}.staging-"


def lock_path_for(target: Path) -> Path:
    """The per-target fill lock file: a sibling, kept (unlinking a lock file races)."""
    return target.parent / f".{target.name}.lock"


def _say_waiting(what: str) -> None:
    print(f"harness: waiting for another process filling {what}", file=sys.stderr, flush=True)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


@contextlib.contextmanager
def hold_lock(
    path: Path, what: str, on_wait: Callable[[str], None] = _say_waiting
) -> Iterator[None]:
    """Hold an exclusive flock on the file `path`, waiting for it if another process holds
    it; `on_wait(what)` is called once before waiting, so a user knows why nothing moves."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        if not _try_flock(fd):
            on_wait(what)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # drops the lock


@contextlib.contextmanager
def fill_lock(
    target: Path, what: str | None = None, on_wait: Callable[[str], None] = _say_waiting
) -> Iterator[None]:
    """The per-target fill lock: wrap check-adopt-or-build in it."""
    target = target.absolute()
    with hold_lock(lock_path_for(target), what or target.name, on_wait):
        yield


@contextlib.contextmanager
def _parent_locked(parent: Path) -> Iterator[None]:
    """A short exclusive lock on the parent directory itself (a directory fd can be
    flock'ed): creating a staging directory and sweeping never interleave."""
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _is_staging_of(name: str, target: Path) -> bool:
    return name.startswith(staging_prefix(target)) or name == f".{target.name}{_LEGACY_SUFFIX}"


def remove_if_dead(path: Path) -> bool:
    """Remove the staging directory `path` if no live filler holds its lock."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    try:
        if not _try_flock(fd):
            return False  # a live filler owns it
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def is_staging_name(name: str) -> bool:
    """Whether a directory entry's name is some target's staging directory."""
    return name.startswith(".") and (".staging-" in name or name.endswith(_LEGACY_SUFFIX))


@contextlib.contextmanager
def _own_staging(target: Path) -> Iterator[Path]:
    """Sweep dead siblings, then create and lock this filler's staging directory; it is
    removed when the block ends, whatever ends it."""
    with _parent_locked(target.parent):
        for path in sorted(target.parent.iterdir()):
            if _is_staging_of(path.name, target):
                remove_if_dead(path)
        staging = Path(tempfile.mkdtemp(prefix=staging_prefix(target), dir=target.parent))
        fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX)  # ours and new: cannot be held by anyone else
    try:
        yield staging
    finally:
        try:
            shutil.rmtree(staging, ignore_errors=True)
        finally:
            os.close(fd)


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
    with _own_staging(target) as staging:
        staged = staging / target.name
        yield staged
        with staged.open("rb") as handle:
            os.fsync(handle.fileno())
        try:
            os.link(staged, target)  # atomic, and fails with EEXIST instead of replacing
        except FileExistsError as exc:
            raise TargetExists(target.name) from exc
        _fsync_dir(target.parent)


@contextlib.contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield a directory to fill; on success it is renamed to `target` (absent or empty)."""
    target = target.absolute()
    if target.is_symlink() or (target.exists() and any(target.iterdir())):
        raise TargetExists(target.name)
    with _own_staging(target) as staging:
        content = staging / "content"
        content.mkdir(mode=0o755)
        yield content
        _move_into_place(content, target)


def _move_into_place(content: Path, target: Path) -> None:
    """Rename a filled staging directory to `target` (absent or empty), durably."""
    if target.exists():
        try:
            target.rmdir()  # empty, or the rename below could not be atomic
        except OSError as exc:
            raise TargetExists(target.name) from exc
    try:
        content.rename(target)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise TargetExists(target.name) from exc
        raise
    _fsync_dir(target.parent)


class UnnamedStage:
    """A staging directory whose target is named only after it is filled.

    Why: an entry keyed by the digest of what was read *while* writing it (a snapshot
    pinned in the same pass that converts it) has no name until the pass ends. The
    content is staged under the parent like any other (`.unkeyed.staging-<random>`,
    swept when its filler is dead) and moved to its target by :meth:`move_into`.
    """

    def __init__(self, parent: Path, content: Path) -> None:
        self.parent = parent
        self.content = content

    def move_into(self, name: str) -> Path:
        """Rename the content to `parent/name` (absent or empty); the caller holds that
        target's :func:`fill_lock`. Returns the target."""
        target = self.parent / name
        if target.is_symlink() or (target.exists() and any(target.iterdir())):
            raise TargetExists(target.name)
        _move_into_place(self.content, target)
        return target


UNNAMED = "unkeyed"  # the pseudo-target every unnamed stage is a staging sibling of


@contextlib.contextmanager
def staged_unnamed(parent: Path) -> Iterator[UnnamedStage]:
    """Yield an :class:`UnnamedStage` under *parent*; whatever was not moved into a
    target when the block ends is removed."""
    parent = parent.absolute()
    with _own_staging(parent / UNNAMED) as staging:
        content = staging / "content"
        content.mkdir(mode=0o755)
        yield UnnamedStage(parent, content)
