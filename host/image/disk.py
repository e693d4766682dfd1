"""Filesystem images made from directories, without loop mounts.

Why `mkfs.ext4 -d`: it copies a directory tree into a new filesystem image as an
ordinary file write (no loop device, no mount, no privileges beyond reading the
tree), in ~1.5 s for the rootfs. The root disk becomes a qcow2 base that every trial
uses through its own overlay; a data disk is journal-less ext4 attached read-only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from host.image.digest import sha256_file
from host.image.errors import ImageError, category_for_oserror
from host.image.tools import run_tool
from receipts.staging import staged_file

_MIB = 1 << 20


def mkfs_ext4_argv(
    source: Path, image: Path, size_bytes: int, *, journal: bool, label: str
) -> list[str]:
    """The mkfs.ext4 command (pure; unit-tested)."""
    argv = ["mkfs.ext4", "-q", "-F", "-L", label, "-m", "0", "-E", "root_owner=0:0"]
    if not journal:
        argv += ["-O", "^has_journal"]
    argv += ["-d", str(source), str(image), f"{size_bytes // 1024}k"]
    return argv


def make_ext4(source: Path, image: Path, size_bytes: int, *, journal: bool, label: str) -> None:
    """Write an ext4 image of `size_bytes` holding a copy of the tree at `source`."""
    if size_bytes % 4096 or size_bytes < 8 * _MIB:
        raise ImageError("build_failed", "disk")
    run_tool(
        mkfs_ext4_argv(source, image, size_bytes, journal=journal, label=label),
        category="build_failed",
        step="disk",
        timeout_s=600.0,
    )


def convert_to_qcow2(raw: Path, dest: Path) -> None:
    """qemu-img convert raw → qcow2 (zero clusters are not stored)."""
    run_tool(
        ["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(dest)],
        category="build_failed",
        step="disk",
        timeout_s=600.0,
    )


def tree_size_estimate(source: Path) -> int:
    """Bytes a journal-less ext4 needs for `source`: blocks, inodes, and slack."""
    total = 0
    inodes = 0
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        for name in dirnames + filenames:
            inodes += 1
            path = Path(dirpath) / name
            st = path.lstat()
            total += (st.st_size + 4095) // 4096 * 4096
    estimate = int(total * 1.2) + inodes * 4096 + 32 * _MIB
    return (estimate + _MIB - 1) // _MIB * _MIB


@dataclass(frozen=True)
class DataDisk:
    """A read-only data disk: where it is, its digest and size."""

    path: Path
    sha256: str
    size_bytes: int


def build_data_disk(source: Path, dest: Path, size_bytes: int | None = None) -> DataDisk:
    """Stage a journal-less ext4 image of `source` at `dest` (never overwrites)."""
    if not source.is_dir() or source.is_symlink():
        raise ImageError("build_failed", "data_disk")
    size = size_bytes if size_bytes is not None else tree_size_estimate(source)
    try:
        with staged_file(dest) as staged:
            make_ext4(source, staged, size, journal=False, label="harness-ro")
            digest = sha256_file(staged)
            length = staged.stat().st_size
    except ImageError as exc:
        raise ImageError(exc.category, "data_disk") from None
    except OSError as exc:
        raise ImageError(category_for_oserror(exc, "build_failed"), "data_disk") from None
    return DataDisk(path=dest.absolute(), sha256=digest, size_bytes=length)
