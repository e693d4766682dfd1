"""Copy a workspace the agent touched, and describe how it differs from the original.

Only regular files and directories are copied; a symlink, FIFO or device the agent's
test runs may have left behind is not followed into the verification copy (it could
point anywhere), and counts as a change. The "diff digest" is the SHA-256 of the
canonical list of (path, digest before, digest after) for every changed path: a
deterministic identity of the agent's final change, without carrying its text.

The suspicious-change flags name what the change adds or alters that can reach into a
test run instead of into the code under test (receipts.records.verification
SuspiciousChange). They are for a reviewer; they do not decide the verdict.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from receipts.canonical import canonical
from receipts.records.verification import SuspiciousChange

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
    suspicious: tuple[SuspiciousChange, ...] = ()


def plugin_modules(*commands: Sequence[str]) -> frozenset[str]:
    """Top-level module names the commands load with pytest's `-p NAME` (`-pNAME`);
    `no:NAME` disables a plugin and names none."""
    names: set[str] = set()
    for argv in commands:
        for index, arg in enumerate(argv):
            value = None
            if arg == "-p" and index + 1 < len(argv):
                value = argv[index + 1]
            elif arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
                value = arg[2:]
            if value and not value.startswith("no:"):
                names.add(value.split(".", 1)[0])
    return frozenset(names)


_SITE_HOOKS: dict[str, SuspiciousChange] = {
    "sitecustomize": "sitecustomize",
    "usercustomize": "usercustomize",
}


def suspicious_flags(
    path: str, after: str, original_top: frozenset[str], plugins: frozenset[str]
) -> set[SuspiciousChange]:
    """The flags one added or changed entry raises (`after`: its digest or entry type)."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    stem = name.removesuffix(".py")
    flags: set[SuspiciousChange] = set()
    if name == "conftest.py":
        flags.add("conftest")
    if fnmatch.fnmatchcase(name, "pytest_*.py") or any(part in plugins for part in parts[:-1]):
        flags.add("pytest_plugin")
    if name.endswith(".py") and stem in plugins:
        flags.add("pytest_plugin")
    if name.endswith(".pth"):
        flags.add("pth_file")
    for part in (*parts[:-1], stem if name.endswith(".py") else name):
        if part in _SITE_HOOKS:
            flags.add(_SITE_HOOKS[part])
    if parts[0] == "hidden_tests":
        flags.add("hidden_tests_dir")
    if parts[0] not in original_top:
        flags.add("new_top_level_entry")
    if after in ("symlink", "special"):
        flags.add("special_file")
    return flags


def describe_change(
    original: Path, final: Path, fixtures: tuple[str, ...], plugins: frozenset[str] = frozenset()
) -> Change:
    before, after = file_digests(original), file_digests(final)
    changed = sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )
    original_top = frozenset(PurePosixPath(path).parts[0] for path in before)
    suspicious: set[SuspiciousChange] = set()
    for path in changed:
        now = after.get(path)
        if now is not None:  # added or changed; a deletion plants nothing
            suspicious |= suspicious_flags(path, now, original_top, plugins)
    listing = [
        {"path": path, "before": before.get(path), "after": after.get(path)} for path in changed
    ]
    return Change(
        files_changed=len(changed),
        fixture_changed=any(fixture in changed for fixture in fixtures),
        diff_sha256=hashlib.sha256(canonical(listing)).hexdigest(),
        suspicious=tuple(sorted(suspicious)),
    )


def copy_regular_tree(source: Path, target: Path) -> None:
    """Copy directories and regular files only, never following a link. A file keeps
    whether it is executable (0o755 if any execute bit is set, else 0o644): the bit is
    part of the tree's digest (receipts.treedigest), nothing else of the mode is."""
    target.mkdir(mode=0o755)
    for directory, dirnames, filenames in os.walk(source, followlinks=False):
        base = Path(directory)
        destination = target / base.relative_to(source)
        for name in sorted(dirnames):
            if not (base / name).is_symlink():
                (destination / name).mkdir(mode=0o755)
        for name in sorted(filenames):
            path = base / name
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode):
                copy = destination / name
                copy.write_bytes(path.read_bytes())
                copy.chmod(0o755 if mode & 0o111 else 0o644)
