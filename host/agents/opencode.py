"""The pinned OpenCode CLI (npm `opencode-linux-x64`), kept by content key for the guest.

OpenCode ships as one self-contained executable (Bun, glibc, x86-64 baseline) in the
platform package `opencode-linux-x64`; the `opencode-ai` package around it only picks
the platform package and copies the file. The harness takes that one file: the
tarball's npm integrity and the executable's SHA-256 are pinned here, the cache entry
`<root>/opencode-<version>-<sha256[:16]>/opencode` is filled once (stage, then rename)
and re-hashed before every use; an entry whose file differs is `cache_corrupt`, never
run and never fetched over. The guest checks the same SHA-256 again before it runs the
file (guest/agent/cli/run.py), so what runs is what the receipt names.

    python -m host.agents.opencode      # fill the cache entry (set-up does this)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.agents.npmtarball import NpmFile, TarballError, download, extract_member
from host.wheels import sha256_file
from receipts.staging import fill_lock, staged_directory

VERSION = "1.18.33"
PIN = NpmFile(
    package="opencode-linux-x64",
    version=VERSION,
    integrity=(
        "sha512-q/t/3p2CTxOT9y2kvjesb/LZab2+1eqlhhWA02Be6mjTtmYtNBcBsrI5yDo4Fw7ZSPBW2oyMIGMNRqiKQjiAWw=="
    ),
    tarball_size=60275143,
    member="package/bin/opencode",
    size=185354368,
    sha256="0abbb7c32ab0294c0a7bfa2705f9ff0df5dce5ab721d1f00cccfe393f2a11427",
)
"""The registry's tarball of opencode-linux-x64@1.18.33 and its one executable."""
EXECUTABLE = "opencode"

CliFailure = Literal["fetch_failed", "integrity_mismatch", "cache_corrupt"]


class CliUnavailable(Exception):
    """The pinned CLI could not be fetched, or its cache entry is not what was pinned."""

    def __init__(self, category: CliFailure) -> None:
        super().__init__(category)
        self.category: CliFailure = category


@dataclass(frozen=True)
class CliExecutable:
    """A pinned agent CLI's executable, hashed just now."""

    name: str
    version: str
    path: Path
    sha256: str
    size: int


def default_root() -> Path:
    return Path.home() / ".cache" / "harness" / "agents"


def entry_name(pin: NpmFile) -> str:
    return f"opencode-{pin.version}-{pin.sha256[:16]}"


def _adopt(entry: Path, pin: NpmFile) -> CliExecutable:
    path = entry / EXECUTABLE
    try:
        names = sorted(p.name for p in entry.iterdir())
    except OSError:
        raise CliUnavailable("cache_corrupt") from None
    if names != [EXECUTABLE] or path.is_symlink() or not path.is_file():
        raise CliUnavailable("cache_corrupt")
    digest, size = sha256_file(path)
    if (digest, size) != (pin.sha256, pin.size):
        raise CliUnavailable("cache_corrupt")
    return CliExecutable("opencode", pin.version, path, digest, size)


def ensure_opencode(root: Path | None = None, pin: NpmFile = PIN) -> CliExecutable:
    """Adopt the pinned executable, or fetch it from the npm registry and keep it."""
    root = root if root is not None else default_root()
    entry = root / entry_name(pin)
    root.mkdir(parents=True, exist_ok=True)
    with fill_lock(entry, f"OpenCode {pin.version}"):
        if entry.is_dir():
            return _adopt(entry, pin)
        with staged_directory(entry) as staging:
            try:
                tarball = download(pin, staging)
                target = staging / EXECUTABLE
                extract_member(pin, tarball, target)
            except TarballError as exc:
                failure: CliFailure = (
                    "fetch_failed" if exc.category == "fetch_failed" else "integrity_mismatch"
                )
                raise CliUnavailable(failure) from None
            tarball.unlink()
            target.chmod(0o555)
        return _adopt(entry, pin)


def main() -> int:
    try:
        executable = ensure_opencode()
    except CliUnavailable as exc:
        print(f"opencode: {exc.category}", file=sys.stderr)
        return 1
    print(executable.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
