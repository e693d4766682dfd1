"""Run a command with one directory bind-mounted read-only over itself.

That is how the gate's runtime root arrives in a guest (a read-only data disk), and the
gate refuses any other. The mount lives in a private mount namespace of the command
(`unshare -m`; with `-r` as well when not root), so nothing outside the test sees it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_SCRIPT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && '
_OVERLAY = 'mount --bind "$1" "$2" && shift 2 && '


def read_only(
    root: Path,
    argv: Sequence[str],
    *,
    unprivileged: bool = False,
    writable_over: tuple[Path, Path] | None = None,
) -> list[str]:
    """`argv`, run with `root` read-only; `unprivileged`: the command will not run as
    root (it is started with another uid), so it needs its own user namespace.
    `writable_over` (source, target): then bind-mount writable `source` over `target`
    inside the read-only root."""
    namespace = ["-m"] if os.geteuid() == 0 and not unprivileged else ["-r", "-m"]
    script = _SCRIPT + (_OVERLAY if writable_over else "") + 'exec "$@"'
    over = [str(path) for path in writable_over] if writable_over else []
    return ["unshare", *namespace, "sh", "-c", script, "sh", str(root), *over, *argv]
