"""Pin tables: a source directory is exactly the files a table names, byte for byte.

Why: a model directory is external input that our converter reads and (for some
repositories) code a loader could import. Hash-pinning the files we read proves
nothing if other files ride along, so the check is of the whole tree: every file
must be named with its size and SHA-256; an unlisted file is refused (and named as
importable when its suffix is one Python would import, docs/engineering.md §4), any
``__pycache__`` is refused (an unchecked ``.pyc`` runs in place of its source), and
symlinks are refused (a pinned name must not point elsewhere), with one exception:
the Hugging Face cache layout. ``hf download`` without ``--local-dir`` writes
``<repo>/snapshots/<revision>/NAME`` as a relative symlink to ``../../blobs/<hash>``;
such a link is accepted when it resolves, lexically and on disk, to a regular file
directly inside that same repository's ``blobs/``, and the blob is hashed as the file
it stands for (the pin keeps the snapshot's name). Every other link (absolute,
escaping, into another snapshot, dangling, a loop, a directory) is still refused.
The configuration is then checked against the architecture the profile expects, so
pins recorded for one model cannot silently stand in for another.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from host import cancel
from host.model import progress
from host.model.categories import PinError
from host.model.keys import content_key

CHUNK = 1 << 20
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
IMPORTABLE_SUFFIXES = tuple(
    sorted(
        set(
            importlib.machinery.SOURCE_SUFFIXES
            + importlib.machinery.BYTECODE_SUFFIXES
            + importlib.machinery.EXTENSION_SUFFIXES
        )
    )
)


@dataclass(frozen=True)
class Pin:
    """One pinned file: its POSIX path relative to the root, size and SHA-256."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ExpectedArchitecture:
    """What ``config.json`` must say: ``architectures``, ``model_type`` and any extra
    fields the profile fixes (for example ``hidden_size``)."""

    architectures: tuple[str, ...]
    model_type: str
    fields: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class PinReport:
    """A verified source: its pins and the content key of the pin table."""

    pins: tuple[Pin, ...]
    table_digest: str


def sha256_file(path: Path) -> tuple[str, int]:
    """SHA-256 and byte count of *path*, read in 1 MiB chunks (a bar on a TTY)."""
    digest = hashlib.sha256()
    size = 0
    bar = progress.current()
    with path.open("rb") as handle:
        bar.begin(f"hash {path.name}", os.fstat(handle.fileno()).st_size)
        try:
            while chunk := handle.read(CHUNK):
                cancel.check()  # a cancelled trial stops within one chunk
                digest.update(chunk)
                size += len(chunk)
                bar.advance(len(chunk))
        finally:
            bar.end()
    return digest.hexdigest(), size


def table_digest(pins: Iterable[Pin]) -> str:
    """Content key of a pin table: canonical JSON of its sorted rows."""
    rows = sorted([p.name, p.size, p.sha256] for p in pins)
    return content_key({"pins": rows})


def blob_of(root: Path, link: Path) -> Path:
    """The blob an HF-cache snapshot symlink stands for; refuse any other symlink.

    *root* must be ``<repo>/snapshots/<revision>`` and *link* a relative symlink that
    names, from its own directory, a file directly in ``<repo>/blobs``. The check is
    made twice: lexically on the link text (so a link into another snapshot, even one
    that itself points at a blob, is refused) and on the real paths (so a symlinked
    ``blobs`` or a blob that is itself a link cannot lead elsewhere).
    """
    relative = link.relative_to(root).as_posix()
    target = os.readlink(link)
    if os.path.isabs(target):
        raise PinError("symlink_absolute", relative)
    blobs = root.parent.parent / "blobs"
    named = Path(os.path.normpath(link.parent / target))
    if root.parent.name != "snapshots" or named.parent != blobs:
        raise PinError("symlink_outside_blobs", relative)
    try:
        mode = os.lstat(named).st_mode
    except FileNotFoundError:
        raise PinError("symlink_dangling", relative) from None
    except OSError:
        raise PinError("symlink_not_file", relative) from None
    if not stat.S_ISREG(mode):
        raise PinError("symlink_not_file", relative)
    real = Path(os.path.realpath(link))
    if blobs.is_symlink() or real.parent != Path(os.path.realpath(blobs)):
        raise PinError("symlink_outside_blobs", relative)
    return real


def _walk(root: Path) -> tuple[dict[str, Path], list[str]]:
    """Files under *root* (relative name -> the path to read) and ``__pycache__`` dirs.

    A regular file is read where it is; an HF-cache symlink is read at its blob
    (:func:`blob_of`); any other symlink and any special file is refused.
    """
    files: dict[str, Path] = {}
    caches: list[str] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                path = Path(entry.path)
                mode = entry.stat(follow_symlinks=False).st_mode
                relative = path.relative_to(root).as_posix()
                if stat.S_ISLNK(mode):
                    files[relative] = blob_of(root, path)
                elif stat.S_ISDIR(mode):
                    if entry.name == "__pycache__":
                        caches.append(relative)
                    pending.append(path)
                elif stat.S_ISREG(mode):
                    files[relative] = path
                else:
                    raise PinError("not_regular_file", relative)
    return dict(sorted(files.items())), sorted(caches)


def _check_table(table: Iterable[Pin]) -> dict[str, Pin]:
    by_name: dict[str, Pin] = {}
    for pin in table:
        path = PurePosixPath(pin.name)
        if (
            not pin.name
            or path.is_absolute()
            or any(part in ("", ".", "..") for part in pin.name.split("/"))
            or pin.name in by_name
            or not isinstance(pin.size, int)
            or pin.size < 0
            or not _DIGEST.match(pin.sha256)
        ):
            raise PinError("pin_table_invalid")
        by_name[pin.name] = pin
    if not by_name:
        raise PinError("pin_table_invalid")
    return by_name


def _is_importable(name: str) -> bool:
    return name.endswith(IMPORTABLE_SUFFIXES)


def check_architecture(config_bytes: bytes, expected: ExpectedArchitecture) -> None:
    """Refuse a config whose architecture fields contradict the expectation."""
    try:
        config = json.loads(config_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PinError("config_unreadable") from exc
    if not isinstance(config, dict):
        raise PinError("config_unreadable")
    if config.get("architectures") != list(expected.architectures):
        raise PinError("config_architecture_mismatch")
    if config.get("model_type") != expected.model_type:
        raise PinError("config_architecture_mismatch")
    for key, value in expected.fields:
        if key not in config or config[key] != value:
            raise PinError("config_architecture_mismatch")


def check_tree(root: Path, table: Iterable[Pin]) -> tuple[dict[str, Pin], dict[str, Path]]:
    """Everything but the digests: the table is valid, *root* holds exactly the files
    it names (no unlisted file, no ``__pycache__``, no link but HF-cache blob links),
    each of its pinned size. Returns the pins by name and the path to read for each."""
    by_name = _check_table(table)
    if root.is_symlink():
        raise PinError("symlink")
    if not root.is_dir():
        raise PinError("source_not_directory")
    files, caches = _walk(root)
    if caches:
        raise PinError("pycache_present", caches[0])
    for name in files:
        if name not in by_name:
            if _is_importable(name):
                raise PinError("unlisted_importable_file", name)
            raise PinError("unlisted_file", name)
    for name, pin in sorted(by_name.items()):
        if name not in files:
            raise PinError("missing_file", name)
        if files[name].stat().st_size != pin.size:
            raise PinError("size_mismatch", name)
    return by_name, files


def verify_files(
    by_name: dict[str, Pin],
    files: dict[str, Path],
    names: Iterable[str],
    expected: ExpectedArchitecture | None = None,
) -> None:
    """Hash each of *names* and compare it with its pin; with *expected*, check the
    architecture in ``config.json`` (which must be among *names*) from the very bytes
    that were hashed."""
    config_bytes: bytes | None = None
    for name in sorted(names):
        pin = by_name[name]
        if name == "config.json":
            config_bytes = files[name].read_bytes()
            digest, size = hashlib.sha256(config_bytes).hexdigest(), len(config_bytes)
        else:
            digest, size = sha256_file(files[name])
        if digest != pin.sha256 or size != pin.size:
            raise PinError("digest_mismatch", name)
    if expected is not None:
        if config_bytes is None:
            raise PinError("config_unreadable")
        check_architecture(config_bytes, expected)


def verify_source(
    root: Path, table: Iterable[Pin], expected: ExpectedArchitecture | None = None
) -> PinReport:
    """Verify *root* against *table*; return the report or raise a PinError.

    ``config.json`` is parsed from the very bytes that were hashed, so the file
    checked against the expectation is the file that was pinned.
    """
    by_name, files = check_tree(root, table)
    verify_files(by_name, files, by_name, expected)
    pins = tuple(by_name[name] for name in sorted(by_name))
    return PinReport(pins, table_digest(pins))


def snapshot_files(root: Path) -> dict[str, Path]:
    """The files a pin of *root* would name (relative name -> the path to read), refusing
    what no pin table may hold: a linked or missing root, a ``__pycache__``, a link that
    is not an HF-cache blob link, a special file."""
    if root.is_symlink():
        raise PinError("symlink")
    if not root.is_dir():
        raise PinError("source_not_directory")
    files, caches = _walk(root)
    if caches:
        raise PinError("pycache_present", caches[0])
    return files


def pins_of(root: Path) -> list[Pin]:
    """Record the pin table of *root* (what ``harness model pin`` prints)."""
    pins: list[Pin] = []
    for name, path in snapshot_files(root).items():
        digest, size = sha256_file(path)
        pins.append(Pin(name, size, digest))
    return pins


def format_pins_toml(pins: Iterable[Pin]) -> str:
    """The pin table as TOML ``[[model.pins]]`` rows, ready to paste into a profile."""
    lines: list[str] = []
    for pin in sorted(pins, key=lambda p: p.name):
        lines += [
            "[[model.pins]]",
            f"name = {json.dumps(pin.name)}",
            f"size = {pin.size}",
            f'sha256 = "{pin.sha256}"',
            "",
        ]
    return "\n".join(lines)
