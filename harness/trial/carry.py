"""Carry the agent's final workspace out of its guest, as regular files only.

Why through the host: verification runs in a second, pristine guest (pipeline's
verification stage), and the only thing that may cross from the agent's guest into it
is the final workspace. The agent's guest is untrusted once the model's code has run
there: its `tar` binary, its kernel and every byte it sends may be the agent's. So the
archive is treated as hostile input (docs/engineering.md §13, §14): the host reads it with
`tarfile` member by member and writes only regular files and directories, under names
that are relative, free of `..`, unique and bounded in count and size; links, devices
and FIFOs are dropped (the verifier copies regular files only as well). Only the
executable bit of a file's mode is kept. The result is a plain directory the host
built itself, which is what goes onto the verification guest's read-only disk.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal

MAX_FILES = 20_000
MAX_FILE_BYTES = 16 << 20
MAX_TOTAL_BYTES = 64 << 20
_CHUNK = 1 << 20

CarryRefusal = Literal[
    "archive_malformed", "unsafe_name", "duplicate_name", "too_many_files", "too_large"
]


class CarryRefused(Exception):
    """The archive from the agent's guest is not a workspace the host will carry."""

    def __init__(self, reason: CarryRefusal) -> None:
        super().__init__(reason)
        self.reason: CarryRefusal = reason


@dataclass(frozen=True)
class Carried:
    files: int
    bytes: int
    dropped: int
    """Members that were neither a regular file nor a directory (links, devices...)."""


def tar_command(workspace: str, archive: str) -> str:
    """The guest command that packs `workspace` (numeric owners, no absolute names)."""
    return f"tar --numeric-owner -C {workspace} -cf {archive} ."


def _relative(name: str) -> PurePosixPath | None:
    """The member's path inside the workspace; None for the workspace root itself.
    Raises for an absolute name, a `..` component, or a NUL."""
    if "\x00" in name or name.startswith("/"):
        raise CarryRefused("unsafe_name")
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if any(part == ".." for part in parts):
        raise CarryRefused("unsafe_name")
    return PurePosixPath(*parts) if parts else None


def unpack_workspace(archive: Path, dest: Path) -> Carried:
    """Write the archive's regular files and directories under `dest` (created here,
    must not exist). On refusal `dest` is removed: nothing partial is left."""
    dest.mkdir(mode=0o755)
    try:
        return _unpack(archive, dest)
    except CarryRefused:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (tarfile.TarError, OSError, UnicodeError, EOFError):
        shutil.rmtree(dest, ignore_errors=True)
        raise CarryRefused("archive_malformed") from None


def _unpack(archive: Path, dest: Path) -> Carried:
    seen: set[PurePosixPath] = set()
    files = total = dropped = 0
    with tarfile.open(archive, mode="r:") as tar:
        for member in tar:
            relative = _relative(member.name)
            if relative is None:
                continue
            if relative in seen:
                raise CarryRefused("duplicate_name")
            seen.add(relative)
            if len(seen) > MAX_FILES:
                raise CarryRefused("too_many_files")
            target = dest.joinpath(*relative.parts)
            _check_parents(dest, target)
            if member.isdir():
                target.mkdir(mode=0o755, exist_ok=True)
                continue
            if not member.isreg():
                dropped += 1
                continue
            if member.size > MAX_FILE_BYTES or total + member.size > MAX_TOTAL_BYTES:
                raise CarryRefused("too_large")
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                raise CarryRefused("archive_malformed")
            written = _copy(source, target)
            if written != member.size:
                raise CarryRefused("archive_malformed")
            target.chmod(0o755 if member.mode & stat.S_IXUSR else 0o644)
            files += 1
            total += written
    return Carried(files=files, bytes=total, dropped=dropped)


def _check_parents(dest: Path, target: Path) -> None:
    """Every existing ancestor between `dest` and `target` is a directory we made: a
    file member named like a later member's parent (`a` then `a/b`) is refused."""
    for parent in target.relative_to(dest).parents:
        path = dest / parent
        if path.exists() and not path.is_dir():
            raise CarryRefused("unsafe_name")
    if target.exists() and not target.is_dir():
        raise CarryRefused("duplicate_name")


def _copy(source: IO[bytes], target: Path) -> int:
    written = 0
    with target.open("xb") as out:
        while chunk := source.read(_CHUNK):
            out.write(chunk)
            written += len(chunk)
    return written


def pack_workspace(source: Path, archive: Path) -> int:
    """The tree the host carried (`unpack_workspace`'s output: regular files and
    directories only) as an archive for the verification guest, built here: names sorted,
    owner root, the mode as carried, no timestamps. Returns how many files it holds."""
    files = 0
    with tarfile.open(archive, mode="x:", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(source.rglob("*")):
            info = path.lstat()
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                continue  # the carry wrote none; a tree of anything else is not ours
            member = tarfile.TarInfo(path.relative_to(source).as_posix())
            member.mode = stat.S_IMODE(info.st_mode)
            member.mtime = 0
            if stat.S_ISDIR(info.st_mode):
                member.type = tarfile.DIRTYPE
                tar.addfile(member)
                continue
            member.size = info.st_size
            with path.open("rb") as data:
                tar.addfile(member, data)
            files += 1
    return files
