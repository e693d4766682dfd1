"""A bounded, deterministic walk of a directory tree inside the jail.

Shared by list, glob and grep so all three agree on order (sorted names), on what
is skipped (symlinks are reported, never followed; tool caches like `.git` are
not descended), and on the bounds (entries examined, depth). The walk opens each
directory through the jail's descriptor-relative opens, so it cannot leave the
workspace through a symlink or a mount.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from guest.tools.jail import EntryKind, Jail, JailError, RelPath, check_name, kind_of

# Directories that are never descended (their names still appear in listings).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)


@dataclass(frozen=True)
class Entry:
    """One entry found by the walk; `size` and `nlink` come from `lstat`."""

    path: RelPath
    kind: EntryKind
    size: int
    nlink: int


@dataclass
class WalkBudget:
    """Bounds on one walk, and what the walk did with them."""

    max_entries: int = 20_000
    max_depth: int = 32
    examined: int = 0
    skipped_names: int = 0
    exhausted: bool = False


def walk(jail: Jail, start: RelPath, budget: WalkBudget) -> Iterator[Entry]:
    """Entries under `start` in sorted pre-order. Raises JailError for `start` only."""
    with jail.directory(start) as fd:
        yield from _walk_dir(jail, fd, start, budget, 0)


def _walk_dir(
    jail: Jail, dir_fd: int, here: RelPath, budget: WalkBudget, depth: int
) -> Iterator[Entry]:
    try:
        names = sorted(os.listdir(dir_fd))
    except OSError:
        budget.exhausted = True
        return
    for name in names:
        if budget.examined >= budget.max_entries:
            budget.exhausted = True
            return
        budget.examined += 1
        if check_name(name) is not None:
            budget.skipped_names += 1
            continue
        try:
            st = jail.lstat_at(dir_fd, name)
        except JailError:
            budget.skipped_names += 1
            continue
        if st is None:
            continue
        entry = Entry(here.child(name), kind_of(st.st_mode), st.st_size, st.st_nlink)
        yield entry
        if entry.kind != "dir" or name in SKIP_DIRS:
            continue
        if depth + 1 >= budget.max_depth:
            budget.exhausted = True
            continue
        try:
            child_fd = jail.open_dir_at(dir_fd, name)
        except JailError:
            continue
        try:
            yield from _walk_dir(jail, child_fd, entry.path, budget, depth + 1)
        finally:
            os.close(child_fd)
