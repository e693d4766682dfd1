"""Bind the harness source that runs into the receipt.

From a git checkout: the commit, its tree, and whether the working tree is clean. A
tree is clean only if the files in the checkout are HEAD's tree, byte for byte, and
nothing else that could run is there. The comparison is our own, not `git status`:

- Every path HEAD's tree lists (`git ls-tree -r HEAD`) is hashed here, from the bytes
  on disk, as a git blob (`blob <size>\\0<bytes>`, SHA-1 or SHA-256 as the repository
  uses) and compared with the tree's blob id; file type and executable bit too. No
  index is read, so `--assume-unchanged`, `--skip-worktree`, stale stat data,
  `core.checkStat` and `fsmonitor` cannot hide an edit. hashlib over the raw bytes is
  chosen over `git hash-object`: hash-object applies the clean filters and end-of-line
  conversion configured in the repository (`.git/config`, `.git/info/attributes`, not
  part of the commit), so a local filter could map any bytes to the committed blob; the
  bytes Python imports are the bytes hashed here.
- Every entry under the checkout is walked; one HEAD does not list is dirt (untracked
  and ignored alike). Only the environment directories a checkout legitimately holds at
  its top (.venv, tool caches, build outputs, egg-info, the default receipts folder) are
  not walked; tracked files inside them are still compared.
- Any `__pycache__` or `.pyc` in the tree is dirt, whatever its header says: a
  timestamp-based `.pyc` beside unchanged source runs in place of it, and no header
  proves its code is the source's. The project's venv writes no bytecode (.ci/setup).
- A submodule (a gitlink in HEAD) is checked by the same rules in its own checkout,
  whatever its `submodule.<name>.ignore` says: its HEAD must be the gitlink's commit
  and its tree clean.
- The git directory is pinned: `.git` (a directory, or a `gitdir:` file as in linked
  worktrees and submodules) is resolved here and git runs with GIT_DIR set to it and a
  controlled environment (no user or system config, no replace refs, no GIT_* from the
  caller). A `core.worktree`, GIT_DIR or GIT_WORK_TREE pointing anywhere else is
  refused: the tree git would show is then not the tree that runs.

From an installed (non-editable) package: every file its RECORD lists is re-hashed and
the digest of the canonical (path, sha256) list is recorded; one mismatch is dirt.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path
from typing import Literal

from receipts.canonical import canonical
from receipts.records import SourceRecord
from receipts.records.source import SourceCategory

# Top-level directories of a checkout that hold its environment, never code that the
# harness imports: they are not walked (a tracked file inside one is still compared).
ENVIRONMENT_DIRS = frozenset(
    {
        ".venv",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        "build",
        "dist",
        "receipts-out",
    }
)
GIT_TIMEOUT_S = 30
MAX_SUBMODULE_DEPTH = 8
_CHUNK = 1 << 20
_BLOB_MODES = {"100644": False, "100755": True}  # mode -> executable bit
_SYMLINK_MODE = "120000"
_GITLINK_MODE = "160000"

Dirt = Literal["git_location", "submodule", "bytecode", "files"]
# The refusal category for each kind of dirt; the first kind present names the refusal.
REFUSALS: dict[Dirt, SourceCategory] = {
    "git_location": "git_location_refused",
    "submodule": "submodule_refused",
    "bytecode": "bytecode_refused",
    "files": "dirty_refused",
}


class SourceUnread(RuntimeError):
    """git could not be asked (not a checkout, git missing, timed out)."""


@dataclass(frozen=True)
class GitState:
    commit: str
    tree: str
    dirty_paths: tuple[str, ...]
    dirt: tuple[Dirt, ...]  # the kinds present, in REFUSALS order


def _git(git_dir: Path, *args: str, allow_missing: bool = False) -> bytes:
    """Run git on exactly `git_dir`, with nothing from the caller's environment or config.

    `allow_missing`: exit status 1 is an answer (`git config --get` of an unset key).
    """
    command = ["git", "--no-replace-objects", "-c", "core.fsmonitor=false", *args]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "GIT_DIR": str(git_dir),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "LC_ALL": "C",
    }
    try:
        result = subprocess.run(
            command, cwd=git_dir, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnread(type(exc).__name__) from exc
    if result.returncode == 1 and allow_missing:
        return b""
    if result.returncode != 0:
        raise SourceUnread("git_failed")
    return result.stdout


def resolve_git_dir(checkout: Path) -> Path | None:
    """The git directory `checkout/.git` names, or None when `.git` is neither a directory
    nor a `gitdir:` file (a symlink is refused: it is a pointer we did not resolve)."""
    dot = checkout / ".git"
    try:
        info = os.lstat(dot)
        if stat.S_ISDIR(info.st_mode):
            return dot
        if not stat.S_ISREG(info.st_mode):
            return None
        with dot.open("rb") as handle:
            text = handle.read(4096)
    except OSError as exc:
        raise SourceUnread(type(exc).__name__) from exc
    if not text.startswith(b"gitdir: "):
        return None
    return checkout / os.fsdecode(text[len(b"gitdir: ") :].strip())


def _same(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def location_pinned(checkout: Path, git_dir: Path, *, caller_env: bool) -> bool:
    """No core.worktree, GIT_DIR or GIT_WORK_TREE points away from this checkout.

    git itself is always run on the pinned directory; this refuses the setups in which
    the same checkout shows a different tree to anyone else's git (a `core.worktree`
    pointing at another, clean copy)."""
    if caller_env:  # the caller's own GIT_DIR and GIT_WORK_TREE name the top checkout
        if "GIT_DIR" in os.environ and not _same(os.environ["GIT_DIR"], git_dir):
            return False
        if "GIT_WORK_TREE" in os.environ and not _same(os.environ["GIT_WORK_TREE"], checkout):
            return False
    worktree = _git(git_dir, "config", "--get", "core.worktree", allow_missing=True).strip()
    return not worktree or _same(git_dir / os.fsdecode(worktree), checkout)


def _blob_id(algorithm: str, path: bytes, expect_link: bool) -> str | None:
    """The git blob id of what is at `path` (a link's target for a symlink), or None."""
    digest = hashlib.new(algorithm)
    if expect_link:
        target = os.readlink(path)
        digest.update(b"blob %d\0" % len(target))
        digest.update(target)
        return digest.hexdigest()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        digest.update(b"blob %d\0" % info.st_size)
        read = 0
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
            read += len(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest() if read == info.st_size else None  # changed while read


def _matches(algorithm: str, path: bytes, mode: str, oid: str) -> bool:
    """The entry at `path` is the blob `oid` with `mode` (type and executable bit)."""
    try:
        info = os.lstat(path)
        if mode == _SYMLINK_MODE:
            return stat.S_ISLNK(info.st_mode) and _blob_id(algorithm, path, True) == oid
        if mode not in _BLOB_MODES or not stat.S_ISREG(info.st_mode):
            return False
        if bool(info.st_mode & stat.S_IXUSR) != _BLOB_MODES[mode]:
            return False
        return _blob_id(algorithm, path, False) == oid
    except OSError:
        return False


def _is_bytecode(name: bytes) -> bool:
    return name == b"__pycache__" or name.endswith((b".pyc", b".pyo"))


def _head_entries(git_dir: Path, commit: str) -> dict[bytes, tuple[str, str]]:
    """path -> (mode, object id) for every entry of the commit's tree, recursively."""
    listing = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = {}
    for item in listing.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, _kind, oid = meta.decode("ascii").split(" ")
        entries[path] = (mode, oid)
    return entries


class _Comparison:
    """One walk of a checkout against its HEAD entries, collecting (path, kind) dirt."""

    def __init__(self, checkout: Path, entries: dict[bytes, tuple[str, str]], algorithm: str):
        self.root = os.fsencode(checkout)
        self.entries = entries
        self.algorithm = algorithm
        self.seen: set[bytes] = set()
        self.dirt: list[tuple[bytes, Dirt]] = []

    def run(self, depth: int) -> None:
        self._walk(b"", depth)
        for path, (mode, oid) in self.entries.items():
            if path in self.seen:
                continue
            # Not met by the walk: deleted, or inside an environment directory.
            if mode == _GITLINK_MODE:
                self.dirt.append((path, "submodule"))
            elif _is_bytecode(os.path.basename(path)):
                self.dirt.append((path, "bytecode"))
            elif not _matches(self.algorithm, os.path.join(self.root, path), mode, oid):
                self.dirt.append((path, "files"))

    def _walk(self, prefix: bytes, depth: int) -> None:
        try:
            with os.scandir(os.path.join(self.root, prefix) if prefix else self.root) as it:
                children = sorted(it, key=lambda entry: entry.name)
        except OSError:
            self.dirt.append((prefix, "files"))  # unreadable: cannot be shown to match
            return
        for child in children:
            name = os.fsencode(child.name)
            path = prefix + name
            if not prefix and (name == b".git" or _environment(name)):
                continue
            if _is_bytecode(name):
                self.seen.add(path)
                self.dirt.append((path, "bytecode"))
                continue
            expected = self.entries.get(path)
            if expected is not None:
                self.seen.add(path)
                mode, oid = expected
                if mode == _GITLINK_MODE:
                    if not _submodule_matches(Path(os.fsdecode(child.path)), oid, depth):
                        self.dirt.append((path, "submodule"))
                elif not _matches(self.algorithm, os.fsencode(child.path), mode, oid):
                    self.dirt.append((path, "files"))
                continue
            if child.is_dir(follow_symlinks=False):
                self._walk(path + b"/", depth)
            else:
                self.dirt.append((path, "files"))  # untracked or ignored: not the commit


def _environment(name: bytes) -> bool:
    return os.fsdecode(name) in ENVIRONMENT_DIRS or name.endswith(b".egg-info")


def _submodule_matches(checkout: Path, commit: str, depth: int) -> bool:
    if depth >= MAX_SUBMODULE_DEPTH:
        return False
    try:
        state = _git_state(checkout, depth + 1)
    except SourceUnread:
        return False
    return state.commit == commit and not state.dirt


def git_state(checkout: Path) -> GitState:
    """The checkout's HEAD commit and tree, and every way its files differ from them."""
    return _git_state(checkout, 0)


def _git_state(checkout: Path, depth: int) -> GitState:
    git_dir = resolve_git_dir(checkout)
    if git_dir is None:
        raise SourceUnread("no_git_dir")
    commit = _git(git_dir, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()
    tree = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{tree}}").decode().strip()
    algorithm = _git(git_dir, "rev-parse", "--show-object-format").decode().strip()
    if algorithm not in ("sha1", "sha256"):
        raise SourceUnread("object_format")
    comparison = _Comparison(checkout, _head_entries(git_dir, commit), algorithm)
    if not location_pinned(checkout, git_dir, caller_env=depth == 0):
        comparison.dirt.append((b".git", "git_location"))
    comparison.run(depth)
    kinds = {kind for _, kind in comparison.dirt}
    return GitState(
        commit=commit,
        tree=tree,
        dirty_paths=tuple(sorted({os.fsdecode(path) for path, _ in comparison.dirt})),
        dirt=tuple(kind for kind in REFUSALS if kind in kinds),
    )


def interpreter_dirt() -> tuple[Dirt, ...]:
    """Dirt in how this interpreter imports the tree rather than in the tree: with a
    pycache prefix (PYTHONPYCACHEPREFIX, -X pycache_prefix) Python reads bytecode from
    a directory outside the checkout, where no check here sees a forged .pyc."""
    return ("bytecode",) if sys.pycache_prefix is not None else ()


MALFORMED_HASH = "malformed"
"""What _record_hash gives for a sha256 value that is not base64: never a file's digest,
so the file counts as edited (a RECORD line that cannot be read vouches for nothing)."""


def _record_hash(value: str) -> str | None:
    """RECORD's `sha256=<urlsafe base64>` as hex, or None for other or absent algorithms."""
    algorithm, _, encoded = value.partition("=")
    if algorithm != "sha256" or not encoded:
        return None
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()
    except ValueError:  # binascii.Error: e.g. 41 characters, or not base64 at all
        return MALFORMED_HASH


def installed_digest(dist: Distribution) -> tuple[str, bool]:
    """(digest of the canonical file list, whether every hashed file still matches RECORD)."""
    entries = []
    intact = True
    for file in dist.files or ():
        expected = _record_hash(f"{file.hash.mode}={file.hash.value}") if file.hash else None
        located = Path(str(dist.locate_file(file)))
        try:
            actual = hashlib.sha256(located.read_bytes()).hexdigest()
        except OSError:
            actual = None
        if expected is not None and actual != expected:
            intact = False
        entries.append({"path": str(file), "sha256": actual})
    entries.sort(key=lambda entry: str(entry["path"]))
    return hashlib.sha256(canonical(entries)).hexdigest(), intact


def bind_source(checkout: Path | None, *, refuse_dirty: bool) -> SourceRecord:
    """The source record for this run; `refuse_dirty` is set for dispatched trials."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    if checkout is not None and os.path.lexists(checkout / ".git"):
        try:
            state = git_state(checkout)
        except SourceUnread:
            return SourceRecord(
                category="unread",
                kind="git",
                commit=None,
                tree=None,
                tree_state="unread",
                installed_record_sha256=None,
                duration_ms=elapsed(),
            )
        dirt = [kind for kind in REFUSALS if kind in (*state.dirt, *interpreter_dirt())]
        dirty = bool(dirt)
        return SourceRecord(
            category=REFUSALS[dirt[0]] if dirty and refuse_dirty else "ok",
            kind="git",
            commit=state.commit,
            tree=state.tree,
            tree_state="dirty" if dirty else "clean",
            installed_record_sha256=None,
            duration_ms=elapsed(),
        )
    try:
        digest, intact = installed_digest(distribution("harness"))
    except PackageNotFoundError:
        return SourceRecord(
            category="unread",
            kind="installed",
            commit=None,
            tree=None,
            tree_state="unread",
            installed_record_sha256=None,
            duration_ms=elapsed(),
        )
    return SourceRecord(
        category="dirty_refused" if not intact and refuse_dirty else "ok",
        kind="installed",
        commit=None,
        tree=None,
        tree_state="clean" if intact else "dirty",
        installed_record_sha256=digest,
        duration_ms=elapsed(),
    )
