"""Running the external build tools (apt, dpkg, mmdebstrap, mkfs.ext4, qemu-img).

Why one place: every tool runs with a closed environment (C locale, no interactive
frontends, stdin from /dev/null so mmdebstrap never reads a sources list from it),
and its failure becomes a closed category. The tool's stderr goes to the log only
(`ImageError` never carries it), so no tool text can reach a receipt.
"""

import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from host import cancel
from host.image.categories import BuildStep, ImageFailure
from host.image.errors import ImageError

log = logging.getLogger(__name__)

_ENV_KEEP = ("PATH", "HOME", "TMPDIR")


def tool_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal, fixed environment for build tools."""
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    env.update({"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"})
    if extra:
        env.update(extra)
    return env


def run_tool(
    argv: Sequence[str],
    *,
    category: ImageFailure,
    step: BuildStep,
    cwd: Path | None = None,
    timeout_s: float = 900.0,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run `argv`; return its stdout; raise `ImageError(category, step)` on any failure."""
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=tool_env(env),
            start_new_session=True,  # its own group: a cancel kills the tool's children too
        )
        # A cancelled trial kills the tool within a fraction of a second (host/cancel.py).
        stdout, stderr_bytes = cancel.communicate(process, timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("tool %s could not run: %s", argv[0], exc)
        raise ImageError(category, step) from None
    if process.returncode != 0:
        stderr = stderr_bytes.decode("utf-8", "replace")
        log.warning("tool %s exited %d: %s", argv[0], process.returncode, stderr[-4000:])
        if "No space left on device" in stderr:
            raise ImageError("disk_full", step)
        raise ImageError(category, step)
    return stdout.decode("utf-8", "replace")
