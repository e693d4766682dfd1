"""An operator's pin lock for a model whose weights cannot be fetched here (qwen4b).

`harness model pin --profile NAME --source DIR` hashes a local Hugging Face snapshot
and writes `profiles/NAME.lock.json` (canonical JSON) beside the profile: every file's
path, size and SHA-256, who pinned it (`operator`) and when. The model stage verifies
the snapshot against it and the receipt says `pins_from = operator_lock`. A snapshot
that holds importable files (remote code) is refused: nothing here ever runs it, and a
pin would only make it look vouched for.
"""

from __future__ import annotations

import importlib.machinery
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.profiles.load import PROFILES_DIR
from harness.profiles.model import FilePin, Name
from host.model.pins import Pin, pins_of
from receipts.canonical import CanonicalError, canonical, parse_canonical

IMPORTABLE = tuple(
    importlib.machinery.SOURCE_SUFFIXES
    + importlib.machinery.BYTECODE_SUFFIXES
    + importlib.machinery.EXTENSION_SUFFIXES
)


class PinLock(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    schema_: Literal["harness.pin-lock/1"] = Field("harness.pin-lock/1", alias="schema")
    profile: Name
    pinned_by: Literal["operator"]
    pinned_unix_ms: Annotated[int, Field(ge=0)]
    pins: Annotated[tuple[FilePin, ...], Field(min_length=1)]


class LockError(ValueError):
    """A lock that cannot be written or read; the message is one line."""


def lock_path(profile: str, directory: Path = PROFILES_DIR) -> Path:
    return directory / f"{profile}.lock.json"


def pin_snapshot(
    profile: str,
    source: Path,
    directory: Path = PROFILES_DIR,
    check: Callable[[Path], None] | None = None,
) -> PinLock:
    """Hash *source* and write the lock; *check* (run after hashing, before writing)
    refuses a snapshot the profile's prepare would refuse, so no lock is written for it."""
    pins = pins_of(source)
    if any(pin.name.endswith(IMPORTABLE) for pin in pins):
        raise LockError(f"{source.name}: the snapshot holds importable files; remove them first")
    if check is not None:
        check(source)
    return write_lock(profile, pins, directory)


def write_lock(profile: str, pins: Iterable[Pin], directory: Path = PROFILES_DIR) -> PinLock:
    """Write the operator's lock of *pins* (``pin``, or ``prepare --pin`` from its pass)."""
    lock = PinLock(
        profile=profile,
        pinned_by="operator",
        pinned_unix_ms=int(time.time() * 1000),
        pins=tuple(FilePin(path=pin.name, size=pin.size, sha256=pin.sha256) for pin in pins),
    )
    lock_path(profile, directory).write_bytes(canonical(lock.model_dump(by_alias=True)))
    return lock


def load_lock(profile: str, directory: Path = PROFILES_DIR) -> PinLock | None:
    path = lock_path(profile, directory)
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
        parse_canonical(data)
        return PinLock.model_validate_json(data)
    except (OSError, CanonicalError, ValidationError) as exc:
        raise LockError(f"{path.name}: not a valid pin lock") from exc
