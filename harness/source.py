"""Bind the harness source that runs into the receipt.

From a git checkout: the commit, its tree, and whether the working tree is clean. The
clean check sees untracked and ignored files whatever the local git configuration:
user and system config are not read at all (GIT_CONFIG_GLOBAL=/dev/null,
GIT_CONFIG_NOSYSTEM=1), and the settings that could hide changes are forced on the
command line. The environment directories a checkout legitimately holds (.venv, tool
caches, Python's own timestamp-checked bytecode caches) are not dirt; an unchecked-hash
.pyc is, since it would run in place of the verified source.

From an installed (non-editable) package: every file its RECORD lists is re-hashed and
the digest of the canonical (path, sha256) list is recorded; one mismatch is dirt.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import time
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from receipts.canonical import canonical
from receipts.records import SourceRecord

ENVIRONMENT_PREFIXES = (".venv/", ".mypy_cache/", ".ruff_cache/", ".pytest_cache/", "build/")
GIT_TIMEOUT_S = 30
_PYC_FLAG_HASH_BASED = 0b01
_PYC_FLAG_CHECK_SOURCE = 0b10


class SourceUnread(RuntimeError):
    """git could not be asked (not a checkout, git missing, timed out)."""


@dataclass(frozen=True)
class GitState:
    commit: str
    tree: str
    dirty_paths: tuple[str, ...]


def _git(checkout: Path, *args: str) -> bytes:
    command = [
        "git",
        "-c",
        "core.untrackedCache=false",
        "-c",
        "core.fileMode=true",
        "-c",
        "core.ignoreStat=false",
        "-c",
        "core.checkStat=default",
        "-c",
        "core.trustctime=true",
        "-c",
        "status.showUntrackedFiles=all",
        "-c",
        "core.fsmonitor=false",
        *args,
    ]
    # Only PATH and HOME pass through (no GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE...);
    # HOME does, so that the config overrides below are what keeps ~/.gitconfig out.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
    }
    try:
        result = subprocess.run(
            command, cwd=checkout, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnread(type(exc).__name__) from exc
    if result.returncode != 0:
        raise SourceUnread("git_failed")
    return result.stdout


def unchecked_bytecode(path: Path) -> bool:
    """A .pyc whose header says hash-based without checking the source (or unreadable)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(8)
    except OSError:
        return True
    if len(header) < 8:
        return True
    flags = int.from_bytes(header[4:8], "little")
    return bool(flags & _PYC_FLAG_HASH_BASED) and not flags & _PYC_FLAG_CHECK_SOURCE


def _is_environment(checkout: Path, path: str) -> bool:
    if path.startswith(ENVIRONMENT_PREFIXES) or ".egg-info/" in f"{path}/":
        return True
    if "/__pycache__/" in f"/{path}" or path.startswith("__pycache__/"):
        if path.endswith("/"):
            directory = checkout / path
            return not any(unchecked_bytecode(pyc) for pyc in directory.rglob("*.pyc"))
        return path.endswith(".pyc") and not unchecked_bytecode(checkout / path)
    return False


def git_state(checkout: Path) -> GitState:
    commit = _git(checkout, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()
    tree = _git(checkout, "rev-parse", "--verify", "HEAD^{tree}").decode().strip()
    status = _git(
        checkout, "status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=all"
    )
    dirty = []
    for item in status.split(b"\0"):
        if not item:
            continue
        path = item[3:].decode("utf-8", errors="replace")
        if item.startswith(b"!! ") and _is_environment(checkout, path):
            continue
        dirty.append(path)
    return GitState(commit=commit, tree=tree, dirty_paths=tuple(sorted(dirty)))


def _record_hash(value: str) -> str | None:
    """RECORD's `sha256=<urlsafe base64>` as hex, or None for other or absent algorithms."""
    algorithm, _, encoded = value.partition("=")
    if algorithm != "sha256" or not encoded:
        return None
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()


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

    if checkout is not None and (checkout / ".git").exists():
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
        dirty = bool(state.dirty_paths)
        return SourceRecord(
            category="dirty_refused" if dirty and refuse_dirty else "ok",
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
