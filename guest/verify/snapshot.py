"""Copy a workspace the agent touched, and describe how it differs from the original.

Only regular files and directories are copied; a symlink, FIFO or device the agent's
test runs may have left behind is not followed into the verification copy (it could
point anywhere), and counts as a change. The "diff digest" is the SHA-256 of the
canonical list of (path, digest before, digest after) for every changed path: a
deterministic identity of the agent's final change, without carrying its text.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from receipts.canonical import canonical

_CHUNK = 1 << 20


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_digests(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 for every regular file; other entries map to their type."""
    digests: dict[str, str] = {}
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        for name in sorted(dirnames):
            if (base / name).is_symlink():
                digests[(base / name).relative_to(root).as_posix()] = "symlink"
        for name in filenames:
            path = base / name
            relative = path.relative_to(root).as_posix()
            mode = path.lstat().st_mode
            digests[relative] = _digest(path) if stat.S_ISREG(mode) else "special"
    return digests


@dataclass(frozen=True)
class Change:
    files_changed: int
    fixture_changed: bool
    diff_sha256: str


def describe_change(original: Path, final: Path, fixtures: tuple[str, ...]) -> Change:
    before, after = file_digests(original), file_digests(final)
    changed = sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )
    listing = [
        {"path": path, "before": before.get(path), "after": after.get(path)} for path in changed
    ]
    return Change(
        files_changed=len(changed),
        fixture_changed=any(fixture in changed for fixture in fixtures),
        diff_sha256=hashlib.sha256(canonical(listing)).hexdigest(),
    )


def copy_regular_tree(source: Path, target: Path) -> None:
    """Copy directories and regular files only, never following a link."""
    target.mkdir(mode=0o755)
    for directory, dirnames, filenames in os.walk(source, followlinks=False):
        base = Path(directory)
        destination = target / base.relative_to(source)
        for name in sorted(dirnames):
            if not (base / name).is_symlink():
                (destination / name).mkdir(mode=0o755)
        for name in sorted(filenames):
            path = base / name
            if stat.S_ISREG(path.lstat().st_mode):
                (destination / name).write_bytes(path.read_bytes())
