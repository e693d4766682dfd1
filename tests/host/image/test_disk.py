"""Read-only data disks from a directory: journal-less ext4, staged, never overwritten."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from host.image.digest import sha256_file
from host.image.disk import build_data_disk, mkfs_ext4_argv
from host.image.errors import ImageError


def test_mkfs_command_has_no_journal_for_data_disks() -> None:
    argv = mkfs_ext4_argv(Path("/s"), Path("/d.img"), 64 << 20, journal=False, label="x")
    assert argv[:3] == ["mkfs.ext4", "-q", "-F"]
    assert argv[argv.index("-O") : argv.index("-O") + 2] == ["-O", "^has_journal"]
    assert argv[-4:] == ["-d", "/s", "/d.img", "65536k"]
    journaled = mkfs_ext4_argv(Path("/s"), Path("/d.img"), 64 << 20, journal=True, label="x")
    assert "^has_journal" not in journaled


def test_builds_a_disk_holding_the_tree(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "hello.txt").write_bytes(b"hello from the host\n")
    disk = build_data_disk(src, tmp_path / "data.img")
    assert disk.sha256 == sha256_file(disk.path)
    assert disk.size_bytes == disk.path.stat().st_size
    listing = subprocess.run(
        ["debugfs", "-R", "cat /sub/hello.txt", str(disk.path)],
        capture_output=True,
        check=True,
    )
    assert listing.stdout == b"hello from the host\n"
    features = subprocess.run(
        ["dumpe2fs", "-h", str(disk.path)], capture_output=True, check=True
    ).stdout.decode()
    assert "has_journal" not in features
    assert not any(".staging" in p.name for p in tmp_path.iterdir())


def test_refuses_to_overwrite_and_leaves_no_partial(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    target = tmp_path / "data.img"
    target.write_bytes(b"existing")
    with pytest.raises(ImageError):
        build_data_disk(src, target)
    assert target.read_bytes() == b"existing"
    with pytest.raises(ImageError) as err:
        build_data_disk(tmp_path / "missing", tmp_path / "other.img")
    assert err.value.category == "build_failed"
    assert not (tmp_path / "other.img").exists()
