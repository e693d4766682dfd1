"""Filling the tree of a guest's read-only disk from the repository and the cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The checkout the trial runs from: its guest code, profiles and tasks."""


def link_or_copy(source: str | Path, target: str | Path) -> None:
    """A hard link where the filesystem allows, else a copy: the GGUF can be gigabytes
    and the worker runtime ~100 MB, and both cache entries are immutable (verified by
    digest before use), so a link is as good as a copy for building the data disk."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
