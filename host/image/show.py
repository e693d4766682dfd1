"""`harness image show`: what the image cache holds, each entry verified.

Why verify when listing: a listing that says "ok" for an entry whose bytes changed
would be a claim without evidence. Every entry is checked against its manifest the
same way adoption checks it; anything that is not a well-formed entry is reported
as `corrupt`, never skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.image.errors import ImageError
from host.image.manifest import Manifest, verify_entry

_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class CacheEntry:
    key: str
    state: Literal["ok", "corrupt"]
    manifest: Manifest | None


def list_entries(root: Path) -> list[CacheEntry]:
    """Every key directory under `root`, sorted by key, with its verification state."""
    if not root.is_dir():
        return []
    entries = []
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        if _KEY.fullmatch(path.name) is None or not path.is_dir() or path.is_symlink():
            entries.append(CacheEntry(path.name, "corrupt", None))
            continue
        try:
            entries.append(CacheEntry(path.name, "ok", verify_entry(path, path.name)))
        except ImageError:
            entries.append(CacheEntry(path.name, "corrupt", None))
    return entries
