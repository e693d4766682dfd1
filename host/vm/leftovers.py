"""Finding what a killed orchestrator left behind, by name (for `harness gc`).

Every QEMU this package starts has `harness-vm-<tag>` in its command line and every
scratch directory starts with it (see tags.py). This module only finds; releasing is
the caller's decision, with its own cleanup receipts (`released_by="gc"`).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from host.vm.tags import NAME_PREFIX

_NAME = re.compile(re.escape(NAME_PREFIX).encode() + rb"([0-9a-f]{8,32})")


@dataclass(frozen=True)
class LeftoverProcess:
    pid: int
    tag: str


def find_processes(proc: Path = Path("/proc")) -> list[LeftoverProcess]:
    """Live processes whose command line carries a harness VM name."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            match = _NAME.search((entry / "cmdline").read_bytes())
            if match:
                found.append(LeftoverProcess(int(entry.name), match.group(1).decode()))
    return sorted(found, key=lambda p: p.pid)


def find_scratch_dirs(root: Path) -> list[Path]:
    """Scratch directories (`harness-vm-<tag>-XXXXXXXX`) under a scratch root."""
    if not root.is_dir():
        return []
    pattern = re.compile(re.escape(NAME_PREFIX) + r"[0-9a-f]{8,32}-[A-Za-z0-9_]{8}")
    return sorted(
        p for p in root.iterdir() if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
    )
