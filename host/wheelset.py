"""A set of pinned wheels, fetched once with pip and kept by content key for offline use.

Why: the guest runtime (runtime.py) unpacks wheels whose SHA-256 digests are part of
its key, and those bytes come from the package index. Fetching them on every trial
made every trial need the network, and made the runtime's key a live lookup. Here
the fetch happens once per request: `<root>/<key>/` holds the wheels and `wheels.json`
with each wheel's name, size and SHA-256, hashed from the staged files (docs/engineering.md
§5), and later calls adopt it without pip.

Identity (section 6): the key names the request, what the wheels were asked for
(requirements pinned to exact versions, the Python version and platform pip chose
files for, `--only-binary --no-deps`). Which file pip picked for each requirement, and
its bytes, is the recorded answer in `wheels.json`; it is never asked again for the
same request. The runtime's own key names the wheel digests, not this key, so two
machines that received different files for the same request get different runtimes.

Adopting reads `wheels.json` as canonical JSON of a closed model, re-hashes every wheel
against it (tens of MB: tens of ms) and refuses an entry whose files differ from the
list (`cache_corrupt`), never fetching over it.
"""

from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from host.model.keys import content_key
from host.wheelfetch import WheelFetchFailed, download_wheels
from host.wheels import sha256_file
from receipts.canonical import CanonicalError, canonical, parse_canonical
from receipts.staging import fill_lock, staged_directory
from receipts.types import Sha256Hex

WheelSetFailure = Literal["fetch_failed", "cache_corrupt"]
SIDECAR = "wheels.json"
SCHEMA = "harness.wheelset/1"


class WheelSetError(Exception):
    """The wheel set could not be fetched or its cache entry is corrupt."""

    def __init__(self, category: WheelSetFailure) -> None:
        super().__init__(category)
        self.category: WheelSetFailure = category


@dataclass(frozen=True)
class PinnedWheel:
    path: Path
    sha256: str
    size: int


@dataclass(frozen=True)
class WheelSet:
    key: str
    wheels: tuple[PinnedWheel, ...]
    """Sorted by file name."""
    fetched_by_this_run: bool


def default_root() -> Path:
    """``~/.cache/harness/wheelsets``: one folder per request key."""
    return Path.home() / ".cache" / "harness" / "wheelsets"


def request_key(requirements: list[str]) -> str:
    """The content key of a request (no network: everything here is local)."""
    return content_key(
        {
            "schema": SCHEMA,
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "platform": sysconfig.get_platform(),
            "pip_options": ["--no-deps", "--only-binary=:all:"],
            "requirements": sorted(requirements),
        }
    )


class _Listed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    name: str = Field(pattern=r"^[A-Za-z0-9_.+!-]{1,200}\.whl$")
    sha256: Sha256Hex
    size: int = Field(ge=0)


class _Sidecar(BaseModel):
    """`wheels.json`: the request's key, its requirements, the files pip chose."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    schema_: Literal["harness.wheelset/1"] = Field("harness.wheelset/1", alias="schema")
    key: Sha256Hex
    requirements: list[str]
    wheels: list[_Listed] = Field(min_length=1)


def _adopt(key: str, entry: Path) -> WheelSet:
    try:
        sidecar = _Sidecar.model_validate(
            parse_canonical((entry / SIDECAR).read_bytes()), by_alias=True
        )
    except (OSError, CanonicalError, ValidationError):
        raise WheelSetError("cache_corrupt") from None
    names = [w.name for w in sidecar.wheels]
    present = sorted(p.name for p in entry.iterdir() if p.name != SIDECAR)
    if sidecar.key != key or present != sorted(names) or len(set(names)) != len(names):
        raise WheelSetError("cache_corrupt")
    wheels = []
    for listed in sidecar.wheels:
        path = entry / listed.name
        if path.is_symlink() or not path.is_file():
            raise WheelSetError("cache_corrupt")
        digest, size = sha256_file(path)
        if (digest, size) != (listed.sha256, listed.size):
            raise WheelSetError("cache_corrupt")
        wheels.append(PinnedWheel(path, digest, size))
    return WheelSet(key, tuple(sorted(wheels, key=lambda w: w.path.name)), False)


def ensure_wheelset(requirements: list[str], root: Path | None = None) -> WheelSet:
    """Adopt the wheels for `requirements`, or fetch them (network) and keep them."""
    root = root if root is not None else default_root()
    key = request_key(requirements)
    entry = root / key
    root.mkdir(parents=True, exist_ok=True)
    with fill_lock(entry, "the guest runtime's wheels"):
        if entry.is_dir() and (entry / SIDECAR).exists():
            return _adopt(key, entry)
        with staged_directory(entry) as staging:
            try:
                fetched = download_wheels(requirements, staging)
            except WheelFetchFailed:
                raise WheelSetError("fetch_failed") from None
            if len(fetched) != len(requirements):
                raise WheelSetError("fetch_failed")
            listed = []
            for wheel in fetched:
                digest, size = sha256_file(wheel)
                listed.append({"name": wheel.name, "sha256": digest, "size": size})
            sidecar = _Sidecar.model_validate(
                {
                    "schema": SCHEMA,
                    "key": key,
                    "requirements": sorted(requirements),
                    "wheels": listed,
                },
                by_alias=True,
            )
            payload = canonical(sidecar.model_dump(mode="json", by_alias=True))
            (staging / SIDECAR).write_bytes(payload)
    adopted = _adopt(key, entry)
    return WheelSet(key, adopted.wheels, True)
