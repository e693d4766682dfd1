"""A clean clone of the code under test, for tests that need a checkout nobody touched.

`git clone` of this repository, then the working tree's uncommitted changes and
untracked (not ignored) files committed on top: the clone runs exactly the code being
tested, from a tree whose status is empty, as a fresh CI checkout would be.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_GIT_ID = ("-c", "user.name=harness tests", "-c", "user.email=tests@harness.invalid")


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *_GIT_ID, *args], cwd=cwd, input=stdin, capture_output=True, check=True
    ).stdout


def clean_clone(dest: Path) -> Path:
    """Clone the repository with its working tree's state into `dest`; return `dest`."""
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(dest)], check=True)
    diff = _git(REPO, "diff", "HEAD", "--binary")
    if diff:
        _git(dest, "apply", "--index", "-", stdin=diff)
    untracked = _git(REPO, "ls-files", "--others", "--exclude-standard", "-z").split(b"\0")
    for name in (n.decode() for n in untracked if n):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, dest / name)
        _git(dest, "add", "--", name)
    if _git(dest, "status", "--porcelain"):
        _git(dest, "commit", "--quiet", "-m", "the working tree under test")
    return dest


def dirt(checkout: Path) -> str:
    """Everything `git status` shows, ignored files included: empty for a clean tree."""
    return _git(checkout, "status", "--porcelain", "--ignored", "--untracked-files=all").decode()
