"""The trial's scratch directory and the qcow2 overlay inside it.

Why: everything a VM writes on the host (overlay, key files for fw_cfg, QMP socket,
serial log, QEMU's stderr) lives in one 0700 directory named after the trial tag, so
nothing else on the host can read the keys, and gc can find a leftover by name. The
overlay is `qemu-img create -b base -F qcow2`: the base is only ever opened
read-only, so every trial starts from the same bytes.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

from host.vm.errors import VmError
from host.vm.tags import resource_name

MAX_SOCKET_PATH = 100
"""AF_UNIX paths are limited to 108 bytes; keep the QMP socket path below that."""


def create_scratch(root: Path, tag: str) -> Path:
    """A new 0700 directory `<root>/harness-vm-<tag>-XXXXXXXX`."""
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=resource_name(tag) + "-", dir=root))
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode != 0o700 or len(str(path / "qmp.sock")) > MAX_SOCKET_PATH:
        path.rmdir()
        raise VmError("qemu_start_failed")
    return path


def create_overlay(base: Path, overlay: Path) -> None:
    """A qcow2 overlay over `base` (absolute backing path, explicit backing format)."""
    argv = [
        "qemu-img",
        "create",
        "-q",
        "-f",
        "qcow2",
        "-b",
        str(base.absolute()),
        "-F",
        "qcow2",
        str(overlay),
    ]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, check=False, timeout=60
    )
    if done.returncode != 0 or not overlay.is_file():
        raise VmError("qemu_start_failed")
    os.chmod(overlay, 0o600)
