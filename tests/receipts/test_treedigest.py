"""tree_sha256: one digest of a tree's regular files, computed the same on both sides."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

import pytest

from receipts.canonical import canonical
from receipts.treedigest import TreeDigestError, tree_entries, tree_sha256


def _tree(root: Path) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "a.py").write_bytes(b"print(1)\n")
    (root / "pkg" / "sub" / "b.txt").write_bytes(b"")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    return root


def test_the_digest_is_the_canonical_list_of_regular_files(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    expected = [
        ["a.py", 9, hashlib.sha256(b"print(1)\n").hexdigest(), False],
        ["pkg/sub/b.txt", 0, hashlib.sha256(b"").hexdigest(), False],
        ["run.sh", 10, hashlib.sha256(b"#!/bin/sh\n").hexdigest(), True],
    ]
    assert tree_entries(root) == expected
    assert tree_sha256(root) == hashlib.sha256(canonical(expected)).hexdigest()


@pytest.mark.parametrize(
    "change",
    ["content", "rename", "mode", "add", "remove"],
)
def test_every_change_of_a_regular_file_changes_the_digest(tmp_path: Path, change: str) -> None:
    root = _tree(tmp_path / "t")
    before = tree_sha256(root)
    if change == "content":
        (root / "a.py").write_bytes(b"print(2)\n")
    elif change == "rename":
        (root / "a.py").rename(root / "c.py")
    elif change == "mode":
        (root / "a.py").chmod(0o700)
    elif change == "add":
        (root / "pkg" / "new").write_bytes(b"")
    else:
        (root / "pkg" / "sub" / "b.txt").unlink()
    assert tree_sha256(root) != before


def test_non_regular_entries_are_skipped_always(tmp_path: Path) -> None:
    """Links (to files and directories), FIFOs and empty directories change nothing, and
    a linked directory is not followed."""
    root = _tree(tmp_path / "t")
    before = tree_sha256(root)
    os.symlink(root / "a.py", root / "link.py")
    os.symlink(root / "pkg", root / "pkglink")
    os.mkfifo(root / "fifo")
    (root / "empty").mkdir()
    assert tree_sha256(root) == before


def test_a_root_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(TreeDigestError):
        tree_sha256(tmp_path / "f")
    os.symlink(tmp_path, tmp_path / "dirlink")
    with pytest.raises(TreeDigestError):
        tree_sha256(tmp_path / "dirlink")


def test_a_path_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t")
    (root / os.fsdecode(b"bad\xff")).write_bytes(b"")
    with pytest.raises(TreeDigestError):
        tree_sha256(root)


def test_a_file_swapped_for_a_link_after_listing_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's workspace is hostile: a regular file listed and then replaced by a link
    before it is read must not put the link's target (here a file outside the tree) into
    the digest. The open refuses to follow it (ELOOP)."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "a").write_text("inside")
    outside = tmp_path / "outside"
    outside.write_text("secret")
    real_lstat = os.lstat

    def lstat_then_swap(path: str, *args: object, **kwargs: object) -> os.stat_result:
        info = real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]
        if os.path.basename(path) == "a" and stat.S_ISREG(info.st_mode):
            os.unlink(path)
            os.symlink(outside, path)
        return info

    monkeypatch.setattr(os, "lstat", lstat_then_swap)
    with pytest.raises(OSError) as info:
        tree_sha256(root)
    assert info.value.errno == errno.ELOOP


@pytest.mark.parametrize("mode", [0o700, 0o610, 0o601])
def test_any_one_execute_bit_makes_a_file_executable(tmp_path: Path, mode: int) -> None:
    """Owner, group or other: any one of the three execute bits counts (the verifier's
    copy keeps the bit, and a test runner that runs the file needs only one)."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "run").write_text("#!/bin/sh\n")
    (root / "run").chmod(mode)
    (root / "data").write_text("x")
    (root / "data").chmod(0o666)
    assert [entry[3] for entry in tree_entries(root)] == [False, True]


def test_entries_are_in_path_order_whatever_their_other_fields(tmp_path: Path) -> None:
    """Sorted by path alone: an executable `a` comes before a plain `b`, and the larger,
    later-written file does not move."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "b").write_text("b")
    (root / "a").write_text("a" * 100)
    (root / "a").chmod(0o755)
    (root / "c").write_text("")
    assert [entry[0] for entry in tree_entries(root)] == ["a", "b", "c"]
