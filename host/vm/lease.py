"""A trial's lease: proof, readable by `harness gc`, that the trial's orchestrator lives.

Why: gc finds a trial's leftovers by name (host/vm/tags.py), and names alone cannot
tell a killed trial's resources from those of a trial that is still running beside
it on a shared host; killing the second would turn one crash into two. The lease is
an exclusive `flock` on `lease-<tag>` in the trials root, taken before the trial
acquires anything and held until its receipt is written. The kernel drops the lock
when the orchestrator dies however it dies (SIGKILL included), so gc skips every tag
whose lease it cannot take, and releases the rest. The descriptor is close-on-exec,
so QEMU and the worker never inherit (and so never prolong) the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

LEASE_PREFIX = "lease-"


class LeaseHeld(Exception):
    """Another live process holds this tag's lease."""


def lease_path(trials_root: Path, tag: str) -> Path:
    return trials_root / f"{LEASE_PREFIX}{tag}"


class TrialLease:
    """Held for a trial's whole life; `release` unlinks the file, then drops the lock."""

    def __init__(self, trials_root: Path, tag: str) -> None:
        self.path = lease_path(trials_root, tag)
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LeaseHeld(self.path.name) from None
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> TrialLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_live(trials_root: Path, tag: str) -> bool:
    """Whether a live process holds `tag`'s lease (a probe: takes and drops the lock)."""
    path = lease_path(trials_root, tag)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)
    return False
