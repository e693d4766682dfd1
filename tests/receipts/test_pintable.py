"""Pin tables: every regular file pinned, sorted; links, caches and devices refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pydantic
import pytest

from receipts.pintable import PinnedFile, PinTable, UnpinnableTree, build_pin_table


def _tree(root: Path) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "b.py").write_text("B = 2\n")
    (root / "a.txt").write_text("a")
    return root


def test_pins_every_file_sorted_with_size_and_digest(tmp_path: Path) -> None:
    table = build_pin_table(_tree(tmp_path))
    assert [f.path for f in table.files] == ["a.txt", "pkg/__init__.py", "pkg/sub/b.py"]
    assert table.files[2].size == 6
    assert table.digest() == build_pin_table(tmp_path).digest()


@pytest.mark.parametrize("planted", ["pycache", "file_link", "dir_link", "fifo"])
def test_unpinnable_trees_are_refused(tmp_path: Path, planted: str) -> None:
    root = _tree(tmp_path / "root")
    if planted == "pycache":
        (root / "pkg" / "__pycache__").mkdir()
    elif planted == "file_link":
        (root / "link.py").symlink_to(root / "a.txt")
    elif planted == "dir_link":
        (root / "linkdir").symlink_to(root / "pkg")
    else:
        os.mkfifo(root / "pipe")
    with pytest.raises(UnpinnableTree):
        build_pin_table(root)


@pytest.mark.parametrize("path", ["../x", "a/./b", "a/__pycache__/m.pyc", "/abs"])
def test_table_refuses_paths_that_could_escape_or_cache(path: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        PinTable(files=(PinnedFile(path=path, size=1, sha256="0" * 64),))


def test_table_must_be_sorted_and_unique() -> None:
    pin = PinnedFile(path="b", size=1, sha256="0" * 64)
    other = PinnedFile(path="a", size=1, sha256="0" * 64)
    with pytest.raises(pydantic.ValidationError):
        PinTable(files=(pin, other))
    with pytest.raises(pydantic.ValidationError):
        PinTable(files=(pin, pin))


def test_a_table_holds_at_most_200_000_files() -> None:
    """The gate parses a pin table it received before it trusts anything, so the table's
    length is bounded: 200,000 files (a runtime tree is a few hundred) is accepted, one
    more is refused."""
    pinned = tuple(
        PinnedFile.model_construct(path=f"f{i:06d}", size=1, sha256="0" * 64)
        for i in range(200_001)
    )
    assert len(PinTable(files=pinned[:200_000]).files) == 200_000
    with pytest.raises(pydantic.ValidationError):
        PinTable(files=pinned)


def test_each_pin_is_the_sha256_and_size_of_the_file_s_bytes(tmp_path: Path) -> None:
    """What the gate compares against: the digest of every byte, across read chunks too
    (a 3 MiB + 1 file spans four 1 MiB reads)."""
    root = _tree(tmp_path)
    big = os.urandom(3 * 1024 * 1024 + 1)
    (root / "pkg" / "big.bin").write_bytes(big)
    for pinned in build_pin_table(root).files:
        data = (root / pinned.path).read_bytes()
        assert pinned.size == len(data)
        assert pinned.sha256 == hashlib.sha256(data).hexdigest()
