"""The identity of a directory tree of regular files: one SHA-256 both sides compute.

Why: the final workspace is carried from the guest the agent used to the guest that
verifies it (through the host). The verifier records the digest of the copy it
verified; the host computes the same function over what it carried; equal digests
prove the verdict is about the bytes the host saw.

What is hashed: the canonical JSON (receipts.canonical) of the list, sorted by path,
of `[relative POSIX path, size, sha256 of the bytes, executable]` for every regular
file under `root` (executable: any of the owner/group/other execute bits).

What is skipped, always, and says so here: everything that is not a regular file.
Symbolic links (to files or to directories) are neither followed nor listed, and
neither are FIFOs, sockets or devices; directories contribute only through the
regular files inside them (an empty directory changes nothing). The carry and the
verifier's copy keep regular files only, so a skipped entry never reaches a verifier.
A path that is not valid UTF-8 is refused (`TreeDigestError`): it cannot be named in
canonical JSON, and a tree with one is not a workspace we verify.

Pure: imports nothing of ours but receipts.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from receipts.canonical import canonical

_CHUNK = 1 << 20
_EXECUTABLE = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


class TreeDigestError(ValueError):
    """A tree that cannot be named: its root is no directory, or a path is not UTF-8."""


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    # O_NOFOLLOW: the entry was a regular file when listed; a swap to a link is refused.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_entries(root: Path) -> list[list[object]]:
    """`[path, size, sha256, executable]` for every regular file under `root`, by path."""
    if not stat.S_ISDIR(os.lstat(root).st_mode):
        raise TreeDigestError("root is not a directory")
    entries: list[list[object]] = []
    for directory, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            full = os.path.join(directory, name)
            info = os.lstat(full)
            if not stat.S_ISREG(info.st_mode):
                continue
            relative = Path(full).relative_to(root).as_posix()
            try:
                relative.encode("utf-8")
            except UnicodeEncodeError:
                raise TreeDigestError("a path is not valid UTF-8") from None
            executable = bool(info.st_mode & _EXECUTABLE)
            entries.append([relative, info.st_size, _file_sha256(full), executable])
    entries.sort(key=lambda entry: str(entry[0]))
    return entries


def tree_sha256(root: Path) -> str:
    """SHA-256 of the canonical JSON of `tree_entries(root)` (see the module docstring)."""
    return hashlib.sha256(canonical(tree_entries(root))).hexdigest()
