"""Where code the model chooses runs: the agent's uid, one cgroup per call, private tmp.

Why: a tool such as `run_tests` executes code the model wrote. That code is the
adversary (docs/engineering.md §14). It must not change the guest outside the workspace (a
`sitecustomize.py` planted in the system Python runs inside the verifier), must not
outlive the call (a detached process can rewrite hidden tests while they run), and
must not reach the agent's records. So each command:

- runs as `AGENT_UID`/`AGENT_GID`, a uid that is neither root nor the verifier's
  (65534), with no supplementary groups and `no_new_privs` (a set-uid binary in the
  guest gives it nothing). The uid has no passwd entry: nothing in the image is owned
  by it, so the only things it can write are what we give it (the workspace, chowned
  to it by the agent runner) and world-writable places;
- gets its own mount namespace in which the world-writable directories of the guest
  (`/tmp`, `/var/tmp`, `/dev/shm`) are fresh, size-capped tmpfs mounts that vanish
  with the call: its private tmp;
- runs in its own cgroup v2 (a child of `AGENT_CGROUP`) with pids, memory (no swap)
  and CPU limits, joined before exec so everything it starts is inside; when the call
  ends the whole cgroup is killed with `cgroup.kill` and shown empty (`cgroup.events`
  reads `populated 0`, `cgroup.procs` reads empty) before it is removed. A process
  group kill misses a child that called setsid(); a cgroup kill does not.

The agent runner (root) creates the parent cgroup, chowns the workspace and, after the
loop, counts what is left of the uid (`survivors`). The uid is created at run time in
the sense that nothing needs creating: no image rebuild, no /etc/passwd entry.
"""

from __future__ import annotations

import contextlib
import ctypes
import grp
import os
import pwd
import secrets
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from receipts.records.agent import CgroupEnd

AGENT_UID = 61000
AGENT_GID = 61000
"""Debian's range 60000-64999 is allocated by Debian itself and holds no account in the
guest image; 65534 is the verifier's (nobody)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
AGENT_CGROUP = CGROUP_ROOT / "harness-agent"
CONTROLLERS = ("cpu", "memory", "pids")
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
PRIVATE_TMP_BYTES = 64 * 1024 * 1024
KILL_DEADLINE_S = 5.0

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
CLONE_NEWNS = 0x00020000
PR_SET_NO_NEW_PRIVS = 38


class SandboxUnavailable(OSError):
    """The sandbox could not be set up (not root, no cgroup v2, a limit not applied)."""


@dataclass(frozen=True)
class CgroupLimits:
    """One call's budget, written to its cgroup and read back."""

    memory_bytes: int = 512 * 1024 * 1024
    pids: int = 256
    cpu_millicores: int = 1000

    def files(self) -> dict[str, str]:
        period = 100_000
        return {
            "memory.max": str(self.memory_bytes),
            "memory.swap.max": "0",
            "pids.max": str(self.pids),
            "cpu.max": f"{self.cpu_millicores * period // 1000} {period}",
        }


@dataclass(frozen=True)
class Sandbox:
    """Who a confined command runs as, and where its cgroups live.

    `limits` None applies no controller limit: only for hosts whose cgroup v2 has no
    controllers enabled (the test host's hybrid hierarchy); the agent runner always
    passes limits, and a limit that cannot be written is SandboxUnavailable."""

    uid: int = AGENT_UID
    gid: int = AGENT_GID
    parent: Path = AGENT_CGROUP
    limits: CgroupLimits | None = field(default_factory=CgroupLimits)
    private_dirs: tuple[str, ...] = PRIVATE_DIRS


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


_LIBC = _libc()
_LIBC.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_LIBC.mount.restype = ctypes.c_int
_LIBC.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
_LIBC.prctl.restype = ctypes.c_int
_LIBC.unshare.argtypes = [ctypes.c_int]
_LIBC.unshare.restype = ctypes.c_int


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


# ---- the parent cgroup (agent runner, root) ------------------------------------------------
def _mounted_at(root: Path) -> str | None:
    """The filesystem type of the topmost mount at `root`, or None if nothing is mounted."""
    found = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == str(root):
            found = fields[2]
    return found


def ensure_cgroup2(root: Path = CGROUP_ROOT) -> None:
    """Mount cgroup v2 at `root` if nothing is mounted there (the guest's init mounts
    none; the guest worker's launch script does the same in shell,
    harness/trial/guestworker.py). Anything else mounted there (a v1 or hybrid host's
    tmpfs) is refused, never shadowed: a mount over it would hide every v1 hierarchy."""
    mounted = _mounted_at(root)
    if mounted == "cgroup2":
        return
    if mounted is not None:
        raise SandboxUnavailable("no cgroup v2 at the cgroup root")
    _check(
        _LIBC.mount(b"cgroup2", str(root).encode(), b"cgroup2", MS_NOSUID | MS_NODEV, None),
        "mount cgroup2",
    )


def _enable(group: Path, controllers: tuple[str, ...]) -> None:
    text = " ".join(f"+{name}" for name in controllers)
    (group / "cgroup.subtree_control").write_text(text)
    enabled = set((group / "cgroup.subtree_control").read_text().split())
    if not set(controllers) <= enabled:
        raise SandboxUnavailable("controllers not enabled")


def create_parent(sandbox: Sandbox) -> None:
    """The agent's parent cgroup, with the controllers its calls' limits need. A parent
    left by an earlier run is refused: it would mean agent code of that run may live."""
    try:
        if sandbox.limits is not None:
            ensure_cgroup2(sandbox.parent.parent)
            _enable(sandbox.parent.parent, CONTROLLERS)
        sandbox.parent.mkdir(mode=0o755)
        if sandbox.limits is not None:
            _enable(sandbox.parent, CONTROLLERS)
    except OSError as exc:
        raise SandboxUnavailable("parent cgroup") from exc


# ---- one call's cgroup ----------------------------------------------------------------------
def create_call_cgroup(sandbox: Sandbox) -> Path:
    """A fresh child of the parent with the call's limits, each read back after writing."""
    group = sandbox.parent / f"call-{secrets.token_hex(6)}"
    try:
        group.mkdir(mode=0o755)
        if sandbox.limits is not None:
            for name, value in sandbox.limits.files().items():
                (group / name).write_text(value)
                if (group / name).read_text().strip() != value:
                    raise SandboxUnavailable(f"{name} not applied")
    except OSError as exc:
        with contextlib.suppress(OSError):
            group.rmdir()
        raise SandboxUnavailable("call cgroup") from exc
    return group


def populated(group: Path) -> bool:
    """`cgroup.events`' `populated` key (1 while any process lives in the subtree)."""
    for line in (group / "cgroup.events").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "populated":
            return value.strip() != "0"
    raise OSError("cgroup.events has no populated key")


def kill_and_confirm(group: Path, deadline_s: float = KILL_DEADLINE_S) -> CgroupEnd:
    """Kill every process in `group` (`cgroup.kill`), wait for `populated 0`, read
    `cgroup.procs` empty, and remove the group. The answer is what was read."""
    try:
        (group / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + deadline_s
        while populated(group):
            if time.monotonic() >= deadline:
                return "not_emptied"
            time.sleep(0.01)
        if (group / "cgroup.procs").read_text().strip():
            return "not_emptied"
        group.rmdir()
    except OSError:
        return "unread"
    return "emptied"


def open_procs(group: Path) -> int:
    """`cgroup.procs` of `group`, opened by root in the parent; the child writes `0` (the
    writer itself) to it before exec, so the command's first instruction runs inside."""
    return os.open(group / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)


# ---- in the child, before exec --------------------------------------------------------------
def private_mounts(dirs: tuple[str, ...]) -> None:
    """A new mount namespace in which each of `dirs` is a fresh, capped tmpfs. Mount
    events stay in it (`/` made recursively private first). A working directory under
    one of `dirs` (a workspace in /tmp) is bound back at its own path inside the new
    tmpfs, so the command still finds it by name."""
    cwd = os.getcwd()
    _check(_LIBC.unshare(CLONE_NEWNS), "unshare mount namespace")
    _check(_LIBC.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    options = f"mode=1777,size={PRIVATE_TMP_BYTES}".encode()
    for directory in dirs:
        if not os.path.isdir(directory):
            continue
        _check(
            _LIBC.mount(b"tmpfs", directory.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options),
            "mount private tmp",
        )
        if cwd.startswith(directory.rstrip("/") + "/"):
            os.makedirs(cwd, mode=0o755, exist_ok=True)
            _check(_LIBC.mount(b".", cwd.encode(), None, MS_BIND, None), "bind workspace")
            os.chdir(cwd)


def drop_privileges(uid: int, gid: int) -> None:
    """No supplementary groups, the agent's gid and uid, and no new privileges on exec."""
    _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


# ---- after the agent loop (agent runner, root) ---------------------------------------------
def processes_of(uid: int, proc: Path = Path("/proc")) -> int | None:
    """How many live processes run with `uid` as real, effective, saved or filesystem uid;
    None when /proc could not be read. A zombie (state Z or X) has exited and runs
    nothing; it is not counted (its reaper may be a parent outside our control)."""
    count = 0
    try:
        entries = [entry for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            status = (entry / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited while we looked
        except OSError:
            return None
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        state = fields.get("State", "").split()
        uids = fields.get("Uid", "").split()
        if not state or not uids:
            return None
        if state[0] not in ("Z", "X") and str(uid) in uids:
            count += 1
    return count


def finish(sandbox: Sandbox) -> tuple[int | None, CgroupEnd]:
    """After the loop: kill and remove every call cgroup still there and the parent, then
    count the agent uid's processes. Both are what root read, never assumed."""
    end: CgroupEnd = "emptied"
    try:
        children = [p for p in sandbox.parent.iterdir() if p.is_dir()]
    except OSError:
        return processes_of(sandbox.uid), "unread"
    for child in children:
        result = kill_and_confirm(child)
        if result != "emptied":
            end = result
    parent_end = kill_and_confirm(sandbox.parent)
    if end == "emptied":
        end = parent_end
    return processes_of(sandbox.uid), end


def give_workspace(root: Path, sandbox: Sandbox) -> None:
    """The workspace (and nothing above it) becomes the agent uid's, links not followed."""
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        os.lchown(directory, sandbox.uid, sandbox.gid)
        for name in dirnames + filenames:
            os.lchown(os.path.join(directory, name), sandbox.uid, sandbox.gid)


def writable_by(path: Path, sandbox: Sandbox) -> bool:
    """Whether the agent's uid could create, replace or rename an entry in directory
    `path`: it owns `path` or an ancestor (an owner can chmod), or `path` is writable by
    its group or by others (the uid has no other group). Root's os.access would say yes
    to everything, so the modes are read."""
    info = path.stat()
    if info.st_mode & stat.S_IWOTH or (info.st_gid == sandbox.gid and info.st_mode & stat.S_IWGRP):
        return True
    return any(p.stat().st_uid == sandbox.uid for p in [path, *path.parents])


def _link_protection() -> None:
    """fs.protected_hardlinks and protected_symlinks on: the uid cannot hard-link a file it
    does not own into the workspace, nor make root follow its link in a sticky dir."""
    for name in ("protected_hardlinks", "protected_symlinks"):
        knob = Path("/proc/sys/fs") / name
        if knob.read_text().strip() != "1":
            knob.write_text("1")
            if knob.read_text().strip() != "1":
                raise SandboxUnavailable(f"{name} not applied")


def _has_account(sandbox: Sandbox) -> bool:
    """Whether the uid or gid is an account or group of the system: then files of the
    image may be its own (and so writable by the agent's code)."""
    try:
        pwd.getpwuid(sandbox.uid)
    except KeyError:
        pass
    else:
        return True
    try:
        grp.getgrgid(sandbox.gid)
    except KeyError:
        return False
    return True


def prepare(sandbox: Sandbox, workspace: Path, records: Path) -> None:
    """Before the agent starts (root): the uid and gid no account's, nothing of the uid
    alive, link protection on, the
    records' directory out of the uid's reach, the parent cgroup made, and the
    workspace given to the uid (the only place, with its private tmp, it can write)."""
    if os.geteuid() != 0:
        raise SandboxUnavailable("the agent runner must be root to confine")
    if sandbox.uid in (0, 65534) or sandbox.gid in (0, 65534):
        raise SandboxUnavailable("the agent uid must be neither root nor the verifier's")
    if _has_account(sandbox):
        raise SandboxUnavailable("the agent uid or gid names an account of the image")
    if processes_of(sandbox.uid) != 0:
        raise SandboxUnavailable("a process of the agent uid is already alive")
    try:
        _link_protection()
        workspace = workspace.resolve()
        records_dir = records.parent.resolve()
        if records_dir == workspace or workspace in records_dir.parents:
            raise SandboxUnavailable("the records are inside the workspace")
        if writable_by(records_dir, sandbox):
            raise SandboxUnavailable("the records' directory is writable by the agent uid")
    except OSError as exc:
        raise SandboxUnavailable("preparation") from exc
    create_parent(sandbox)
    give_workspace(workspace, sandbox)
