"""The pin table of a code tree: every file's relative path, size and SHA-256.

The host computes it over the guest runtime it ships; the guest gate verifies the tree
against it before importing anything (docs/engineering.md §4). It lives in receipts/ because
both sides need its one definition and its digest is recorded (`gate.json`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from receipts.canonical import canonical
from receipts.records.base import Part, Record
from receipts.types import ByteCount, Sha256Hex

PinnedPath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*$")]
CHUNK = 1 << 20


class PinnedFile(Part):
    path: PinnedPath
    size: ByteCount
    sha256: Sha256Hex


class PinTable(Record):
    schema_: Literal["harness.gate.pins/1"] = Field("harness.gate.pins/1", alias="schema")
    files: Annotated[tuple[PinnedFile, ...], Field(max_length=200_000)]

    @model_validator(mode="after")
    def _sorted_unique(self) -> PinTable:
        paths = [pinned.path for pinned in self.files]
        if paths != sorted(set(paths)):
            raise ValueError("files must be sorted by path and unique")
        for path in paths:
            if any(part in (".", "..") or part == "__pycache__" for part in path.split("/")):
                raise ValueError("a pinned path may not contain '.', '..' or __pycache__")
        return self

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_bytes()).hexdigest()


class UnpinnableTree(ValueError):
    """The tree holds something a pin table cannot vouch for (a link, a cache, a device)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def build_pin_table(root: Path) -> PinTable:
    """Pin every regular file under `root`; refuse links, special files and __pycache__."""
    files = []
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        for name in dirnames:
            if name == "__pycache__" or (base / name).is_symlink():
                raise UnpinnableTree(name)
        for name in filenames:
            path = base / name
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise UnpinnableTree(name)
            relative = path.relative_to(root).as_posix()
            files.append(
                PinnedFile(path=relative, size=path.stat().st_size, sha256=sha256_file(path))
            )
    return PinTable(files=tuple(sorted(files, key=lambda pinned: pinned.path)))


def pin_table_bytes(table: PinTable) -> bytes:
    return canonical(table.to_json())
