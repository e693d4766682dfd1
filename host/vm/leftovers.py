"""Finding what a killed orchestrator left behind, by name (the one finder `harness gc` uses).

Names are the contract (tags.py): every QEMU this package starts has
`harness-vm-<tag>` in its command line; a libvirt guest is the domain of that name;
the VM's scratch directory is `harness-vm-<tag>-XXXXXXXX` and the trial's data disk
directory `data-<tag>`, both under the trials root; the trial's own scratch is
`harness-trial-<tag>-*` in the system temporary directory; its cgroup is
`trial-<tag>` under the harness parent. Nothing without those names is ever found.
This module only finds; releasing is the caller's decision, with its own cleanup
receipts (`released_by="gc"`).
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.vm.tags import NAME_PREFIX

_NAME = re.compile(re.escape(NAME_PREFIX).encode() + rb"([0-9a-f]{8,32})")
_TAG = r"[0-9a-f]{8,32}"
VM_SCRATCH = re.compile(re.escape(NAME_PREFIX) + _TAG + r"-[A-Za-z0-9_]{8}")
DATA_DIR = re.compile(r"data-" + _TAG)
TRIAL_SCRATCH = re.compile(r"harness-trial-" + _TAG + r"-[A-Za-z0-9_]{8}")
CGROUP = re.compile(r"trial-" + _TAG)

LeftoverKind = Literal["qemu_process", "libvirt_domain", "cgroup", "scratch_dir"]


@dataclass(frozen=True)
class LeftoverProcess:
    pid: int
    tag: str


@dataclass(frozen=True)
class Leftover:
    kind: LeftoverKind
    name: str
    """pid, domain name, cgroup name, or directory path."""


def find_processes(proc: Path = Path("/proc"), *, qemu_only: bool = False) -> list[LeftoverProcess]:
    """Live processes whose command line carries a harness VM name (with `qemu_only`,
    only those whose program is a QEMU system emulator)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            match = _NAME.search(cmdline)
            if match is None:
                continue
            if qemu_only and b"qemu-system" not in cmdline.split(b"\0", 1)[0]:
                continue
            found.append(LeftoverProcess(int(entry.name), match.group(1).decode()))
    return sorted(found, key=lambda p: p.pid)


def _dirs(root: Path, pattern: re.Pattern[str]) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir() if pattern.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
    )


def find_scratch_dirs(root: Path) -> list[Path]:
    """VM scratch directories (`harness-vm-<tag>-XXXXXXXX`) under a scratch root."""
    return _dirs(root, VM_SCRATCH)


def find_trial_dirs(trials_root: Path, temp_root: Path | None = None) -> list[Path]:
    """Every directory a trial names after its tag: VM scratch and data disk directories
    under the trials root, the trial's scratch in the temporary directory."""
    temp = Path(tempfile.gettempdir()) if temp_root is None else temp_root
    found = _dirs(trials_root, VM_SCRATCH) + _dirs(trials_root, DATA_DIR)
    return sorted(found + _dirs(temp, TRIAL_SCRATCH))


def find_cgroups() -> list[str]:
    """`trial-<tag>` cgroups under the harness parent (in any hierarchy)."""
    names: set[str] = set()
    with contextlib.suppress(CgroupError, OSError):  # doctor reports an unusable hierarchy
        for listing in detect().list_names(prefix="trial-").values():
            names.update(name for name in listing.names if CGROUP.fullmatch(name))
    return sorted(names)


def find_domains() -> list[str]:
    """libvirt domains named `harness-vm-<tag>`; none when libvirt is absent or silent."""
    try:
        from host.vm.virtconn import VirtError, harness_domain_names, open_connection
    except ImportError:
        return []  # libvirt-python not installed: there can be no domain of ours
    try:
        conn = open_connection()
    except VirtError:
        return []
    try:
        names = harness_domain_names(conn)
    except VirtError:
        names = []
    finally:
        conn.close()
    pattern = re.compile(re.escape(NAME_PREFIX) + _TAG)
    return [name for name in names if pattern.fullmatch(name)]


def find_leftovers(trials_root: Path, temp_root: Path | None = None) -> list[Leftover]:
    """Everything a trial could have left, in release order: domains and processes
    first (they hold the cgroup and the files), then cgroups, then directories."""
    found: list[Leftover] = [Leftover("libvirt_domain", name) for name in find_domains()]
    found += [Leftover("qemu_process", str(p.pid)) for p in find_processes(qemu_only=True)]
    found += [Leftover("cgroup", name) for name in find_cgroups()]
    found += [
        Leftover("scratch_dir", str(path)) for path in find_trial_dirs(trials_root, temp_root)
    ]
    return found
