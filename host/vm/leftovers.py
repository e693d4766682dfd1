"""Finding what a killed orchestrator left behind, by name (the one finder `harness gc` uses).

Names are the contract (tags.py): every QEMU this package starts has
`harness-vm-<tag>` in its command line; a libvirt guest is the domain of that name;
the VM's scratch directory is `harness-vm-<tag>-XXXXXXXX` and the trial's data disk
directory `data-<tag>`, both under the trials root; the trial's own scratch is
`harness-trial-<tag>-*` under the trials root (in the system temporary directory
before that moved); its lease file is `lease-<tag>` there too; its cgroup is
`trial-<tag>` under the harness parent, the host worker's `worker-<tag>` and the
verification guest's `verifier-<tag>` (its data disk folder `verifier-data-<tag>`).
Nothing without those names is ever found.
A tag whose lease a live orchestrator holds (lease.py) is not a leftover: none of
its resources is returned. This module only finds; releasing is the caller's
decision, with its own cleanup receipts (`released_by="gc"`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from host.cgroups.detect import detect
from host.cgroups.errors import CgroupError
from host.vm.lease import LEASE_PREFIX, is_live
from host.vm.tags import NAME_PREFIX

_NAME = re.compile(re.escape(NAME_PREFIX).encode() + rb"([0-9a-f]{8,32})")
_TAG = r"([0-9a-f]{8,32})"
VM_SCRATCH = re.compile(re.escape(NAME_PREFIX) + _TAG + r"-[A-Za-z0-9_]{8}")
DATA_DIR = re.compile(r"(?:verifier-)?data-" + _TAG)
"""The data disk folder of the agent's guest, and of the verification guest."""
TRIAL_SCRATCH = re.compile(r"harness-trial-" + _TAG + r"-[A-Za-z0-9_]{8}")
CGROUP_PREFIXES = ("trial-", "worker-", "verifier-")
"""The trial's cgroup (the agent guest's QEMU), the host worker's own (placement `host`)
and the verification guest's: the finder lists each prefix, so a kind of cgroup added
here is found by gc too."""
CGROUP = re.compile("(?:" + "|".join(re.escape(p) for p in CGROUP_PREFIXES) + ")" + _TAG)
DOMAIN = re.compile(re.escape(NAME_PREFIX) + _TAG)

LEASE = re.compile(re.escape(LEASE_PREFIX) + _TAG)
LIBVIRT_LOG = re.compile(re.escape(NAME_PREFIX) + _TAG + r"\.log")
LIBVIRT_LOG_DIR = Path("/var/log/libvirt/qemu")
"""libvirt writes one log per domain here and keeps it after the domain ends."""
LeftoverKind = Literal["qemu_process", "libvirt_domain", "cgroup", "scratch_dir", "trial_file"]


@dataclass(frozen=True)
class LeftoverProcess:
    pid: int
    tag: str


@dataclass(frozen=True)
class Leftover:
    kind: LeftoverKind
    name: str
    """pid, domain name, cgroup name, or directory path."""
    tag: str


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
    """Every directory a trial names after its tag: VM scratch, data disk and trial
    scratch directories under the trials root, and trial scratch directories in the
    temporary directory (where trials kept it before)."""
    temp = Path(tempfile.gettempdir()) if temp_root is None else temp_root
    found = _dirs(trials_root, VM_SCRATCH) + _dirs(trials_root, DATA_DIR)
    return sorted(found + _dirs(trials_root, TRIAL_SCRATCH) + _dirs(temp, TRIAL_SCRATCH))


def _files(root: Path, pattern: re.Pattern[str]) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if pattern.fullmatch(p.name) and p.is_file() and not p.is_symlink()
    )


def find_trial_files(trials_root: Path, log_dir: Path = LIBVIRT_LOG_DIR) -> list[Path]:
    """`lease-<tag>` files a killed orchestrator could not unlink, and libvirt's
    `harness-vm-<tag>.log` of a domain that ended without our teardown."""
    return _files(trials_root, LEASE) + _files(log_dir, LIBVIRT_LOG)


def find_cgroups() -> list[str]:
    """`trial-<tag>`, `worker-<tag>` and `verifier-<tag>` cgroups under the harness parent
    (any hierarchy)."""
    names: set[str] = set()
    with contextlib.suppress(CgroupError, OSError):  # doctor reports an unusable hierarchy
        hierarchy = detect()
        for prefix in CGROUP_PREFIXES:
            for listing in hierarchy.list_names(prefix=prefix).values():
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
    return [name for name in names if DOMAIN.fullmatch(name)]


def _tag(pattern: re.Pattern[str], name: str) -> str:
    match = pattern.fullmatch(name)
    if match is None:
        raise ValueError("not a trial name")
    return match.group(1)


def _path_tag(path: Path) -> str:
    for pattern in (VM_SCRATCH, DATA_DIR, TRIAL_SCRATCH, LEASE, LIBVIRT_LOG):
        if pattern.fullmatch(path.name):
            return _tag(pattern, path.name)
    raise ValueError("not a trial directory")


def _live(trials_root: Path, tag: str) -> bool:
    """A held lease, or one that could not be tested (never release on a guess)."""
    try:
        return is_live(trials_root, tag)
    except OSError:
        return True


def _names_root(pid: str, trials_root: Path, proc: Path) -> bool:
    """Whether a process's command line names a VM scratch path under `trials_root`
    (absolute, as given or resolved): a QEMU's disks, sockets and logs live in its
    trial's scratch. The path must start an argument or follow `=`, `:` or `,` (QEMU's
    option syntax), so `/b/trials` never matches inside `/a/b/trials`."""
    try:
        cmdline = (proc / pid / "cmdline").read_bytes()
    except OSError:
        return False
    roots = {os.path.abspath(trials_root), os.path.realpath(trials_root)}
    return any(
        re.search(rb"(?:^|[\0=:,])" + re.escape(f"{root}/{NAME_PREFIX}".encode()), cmdline)
        for root in roots
    )


def find_leftovers(
    trials_root: Path,
    temp_root: Path | None = None,
    log_dir: Path = LIBVIRT_LOG_DIR,
    proc: Path = Path("/proc"),
) -> list[Leftover]:
    """Everything a dead trial of `trials_root` left, in release order: domains and
    processes first (they hold the cgroup and the files), then cgroups, directories,
    files (lease, libvirt log).

    Why two rules: a trial's lease lives in its own trials root, and gc can only test
    the leases of the root it was given. Names in the trials root (scratch, data disk,
    lease) belong to that root. Names shared by the whole host (QEMU processes, libvirt
    domains and logs, cgroups, trial scratch in the temporary directory) carry only the
    tag, so gc takes them only for a tag that has a trace in this root: a file or
    directory of the tag there, or a QEMU whose command line names a scratch path under
    it. A trial of another root (a test's, a second operator's) has no trace here and
    is left alone, however dead it looks from here. Resources of a tag whose lease a
    live orchestrator holds are never included."""
    dirs = _dirs(trials_root, VM_SCRATCH) + _dirs(trials_root, DATA_DIR)
    dirs += _dirs(trials_root, TRIAL_SCRATCH)
    here = [Leftover("scratch_dir", str(path), _path_tag(path)) for path in sorted(dirs)]
    leases = _files(trials_root, LEASE)
    here_files = [Leftover("trial_file", str(path), _path_tag(path)) for path in leases]
    processes = find_processes(proc, qemu_only=True)
    traced = {item.tag for item in here + here_files}
    traced |= {p.tag for p in processes if _names_root(str(p.pid), trials_root, proc)}
    temp = Path(tempfile.gettempdir()) if temp_root is None else temp_root
    shared = [Leftover("libvirt_domain", n, _tag(DOMAIN, n)) for n in find_domains()]
    shared += [Leftover("qemu_process", str(p.pid), p.tag) for p in processes]
    shared += [Leftover("cgroup", name, _tag(CGROUP, name)) for name in find_cgroups()]
    shared_dirs = [
        Leftover("scratch_dir", str(path), _path_tag(path)) for path in _dirs(temp, TRIAL_SCRATCH)
    ]
    logs = [
        Leftover("trial_file", str(path), _path_tag(path)) for path in _files(log_dir, LIBVIRT_LOG)
    ]
    ours = [item for item in shared if item.tag in traced]
    dirs_all = sorted(here + [d for d in shared_dirs if d.tag in traced], key=lambda i: i.name)
    found = ours + dirs_all + here_files + [item for item in logs if item.tag in traced]
    live = {tag for tag in {item.tag for item in found} if _live(trials_root, tag)}
    return [item for item in found if item.tag not in live]


def find_unowned(
    trials_root: Path, log_dir: Path = LIBVIRT_LOG_DIR, proc: Path = Path("/proc")
) -> list[Leftover]:
    """The host-wide resources with a harness name that `find_leftovers(trials_root)`
    leaves alone: no trace of their tag in this root (another root's trials, live or
    dead, or a VM started outside any trial). Listed so an operator sees them and can
    run gc with their own trials root."""
    taken = {
        (item.kind, item.name) for item in find_leftovers(trials_root, log_dir=log_dir, proc=proc)
    }
    shared = [Leftover("libvirt_domain", n, _tag(DOMAIN, n)) for n in find_domains()]
    shared += [
        Leftover("qemu_process", str(p.pid), p.tag) for p in find_processes(proc, qemu_only=True)
    ]
    shared += [Leftover("cgroup", name, _tag(CGROUP, name)) for name in find_cgroups()]
    return [
        item
        for item in shared
        if (item.kind, item.name) not in taken and not _live(trials_root, item.tag)
    ]
