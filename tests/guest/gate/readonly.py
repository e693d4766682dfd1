"""Run a command with one directory bind-mounted read-only over itself.

That is how the gate's runtime root arrives in a guest (a read-only data disk), and the
gate refuses any other. The mount lives in a private mount namespace of the command
(`unshare -m`; with `-r` as well when not root), so nothing outside the test sees it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_SCRIPT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'


def read_only(root: Path, argv: Sequence[str], *, unprivileged: bool = False) -> list[str]:
    """`argv`, run with `root` read-only; `unprivileged`: the command will not run as
    root (it is started with another uid), so it needs its own user namespace."""
    namespace = ["-m"] if os.geteuid() == 0 and not unprivileged else ["-r", "-m"]
    return ["unshare", *namespace, "sh", "-c", _SCRIPT, "sh", str(root), *argv]
