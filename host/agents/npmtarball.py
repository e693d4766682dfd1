"""Fetch one pinned npm package tarball from the registry and take one file out of it.

Why by hand: `npm install` runs the package's install scripts and fetches every
optional platform package (OpenCode: ~354 MB, both x64 builds, and Debian's npm is a
large install of its own). What the harness needs is one file of one tarball, and the
registry's tarball URL and its `integrity` (SHA-512, the digest npm itself checks) are
stable and public. So: one HTTPS GET (urllib, bounded in bytes and time), the tarball's
SHA-512 checked against the pin before anything is read from it, then the member
extracted with `tarfile` (no links, no paths followed) and its SHA-256 checked against
its own pin. The registry's base can be pointed at a mirror with `npm_config_registry`,
as npm itself is.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host import cancel

DEFAULT_REGISTRY = "https://registry.npmjs.org"
FETCH_DEADLINE_S = 600.0
"""One socket read's bound; a registry that stops sending fails instead of hanging."""
_CHUNK = 1 << 20

TarballFailure = Literal["fetch_failed", "integrity_mismatch", "member_missing", "member_mismatch"]


class TarballError(Exception):
    """The tarball could not be fetched, or what came is not what the pin names."""

    def __init__(self, category: TarballFailure) -> None:
        super().__init__(category)
        self.category: TarballFailure = category


@dataclass(frozen=True)
class NpmFile:
    """One file inside one exact npm package tarball, and the digests that name both."""

    package: str
    version: str
    integrity: str
    """The registry's `dist.integrity`: `sha512-<base64>` of the tarball."""
    tarball_size: int
    member: str
    """The file's path inside the tarball (npm tarballs put everything under `package/`)."""
    size: int
    sha256: str

    def url(self, registry: str | None = None) -> str:
        # npm's own name for it is lower-case: the variable an npm user already sets.
        mirror = os.environ.get("npm_config_registry")  # noqa: SIM112
        base = (registry or mirror or DEFAULT_REGISTRY).rstrip("/")
        leaf = self.package.rsplit("/", 1)[-1]
        return f"{base}/{self.package}/-/{leaf}-{self.version}.tgz"


def _integrity_of(path: Path) -> str:
    digest = hashlib.sha512()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha512-" + base64.b64encode(digest.digest()).decode("ascii")


def download(pin: NpmFile, into: Path, registry: str | None = None) -> Path:
    """The tarball at `into/<name>.tgz`, its size and integrity checked against the pin;
    raises TarballError (`fetch_failed`, `integrity_mismatch`)."""
    target = into / f"{pin.package.replace('/', '_')}-{pin.version}.tgz"
    try:
        with (
            urllib.request.urlopen(pin.url(registry), timeout=FETCH_DEADLINE_S) as response,
            target.open("wb") as out,
        ):
            received = 0
            while chunk := response.read(_CHUNK):
                cancel.check()
                received += len(chunk)
                if received > pin.tarball_size:
                    raise TarballError("integrity_mismatch")
                out.write(chunk)
    except (urllib.error.URLError, OSError, ValueError):
        raise TarballError("fetch_failed") from None
    if target.stat().st_size != pin.tarball_size or _integrity_of(target) != pin.integrity:
        raise TarballError("integrity_mismatch")
    return target


def extract_member(pin: NpmFile, tarball: Path, target: Path) -> None:
    """Copy the pinned member (a regular file) to `target` and check its size and SHA-256;
    raises TarballError (`member_missing`, `member_mismatch`)."""
    with tarfile.open(tarball, "r:gz") as archive:
        try:
            info = archive.getmember(pin.member)
        except KeyError:
            raise TarballError("member_missing") from None
        if not info.isfile() or info.size != pin.size:
            raise TarballError("member_mismatch")
        source = archive.extractfile(info)
        assert source is not None  # a regular file always has a stream
        with source, target.open("wb") as out:
            shutil.copyfileobj(source, out, _CHUNK)
    digest = hashlib.sha256()
    with target.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != pin.sha256:
        raise TarballError("member_mismatch")
