"""A deterministic `newc` cpio writer for the initramfs.

Why our own writer: the initramfs must rebuild byte-identically (its digest is in the
image manifest and in receipts), and GNU cpio copies host inode numbers, owners and
mtimes. Here entries are sorted by name, owned by root, timestamped 0, numbered
sequentially, and device nodes (`/dev/console`, which the kernel opens for init's
stdio before devtmpfs is mounted) are written without needing mknod on the host.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import Literal

EntryKind = Literal["file", "dir", "symlink", "chardev"]

_TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class CpioEntry:
    """One archive member; `data` is the content (file) or the target (symlink)."""

    name: str
    kind: EntryKind
    mode: int = 0o755
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        if self.name.startswith("/") or ".." in self.name.split("/") or not self.name:
            raise ValueError("cpio names are relative and never contain '..'")


_TYPE_BITS: dict[EntryKind, int] = {
    "file": stat.S_IFREG,
    "dir": stat.S_IFDIR,
    "symlink": stat.S_IFLNK,
    "chardev": stat.S_IFCHR,
}


def _pad4(n: int) -> bytes:
    return b"\x00" * ((4 - n % 4) % 4)


def _header(fields: tuple[int, ...]) -> bytes:
    """ino, mode, uid, gid, nlink, mtime, size, devmajor, devminor, rdevmajor, rdevminor,
    namesize, check: thirteen 8-digit hex fields after the magic."""
    return b"070701" + b"".join(f"{f:08X}".encode("ascii") for f in fields)


def write_newc(entries: list[CpioEntry]) -> bytes:
    """The archive bytes: entries sorted by name, fixed metadata, then the trailer."""
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("duplicate cpio entry")
    out = bytearray()
    for ino, entry in enumerate(sorted(entries, key=lambda e: e.name), start=1):
        mode = _TYPE_BITS[entry.kind] | (entry.mode & 0o7777)
        data = entry.data if entry.kind in ("file", "symlink") else b""
        nlink = 2 if entry.kind == "dir" else 1
        name = entry.name.encode("utf-8") + b"\x00"
        header = _header((ino, mode, 0, 0, nlink, 0, len(data), 0, 0, *entry.rdev, len(name), 0))
        out += header + name + _pad4(len(header) + len(name))
        out += data + _pad4(len(data))
    name = _TRAILER.encode("ascii") + b"\x00"
    header = _header((0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, len(name), 0))
    out += header + name + _pad4(len(header) + len(name))
    return bytes(out)
