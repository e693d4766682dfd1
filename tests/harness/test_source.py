"""Source binding against real git repositories and a real RECORD."""

from __future__ import annotations

import base64
import hashlib
import py_compile
import subprocess
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest

from harness.source import bind_source, git_state, installed_digest

GIT_ENV = {
    "PATH": "/usr/bin:/bin",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "harness").mkdir(parents=True)
    (root / "harness" / "__init__.py").write_text("")
    (root / ".gitignore").write_text(".venv/\n__pycache__/\n*.log\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def test_clean_checkout_binds_commit_and_tree(repo: Path) -> None:
    record = bind_source(repo, refuse_dirty=True)
    assert record.category == "ok"
    assert record.tree_state == "clean"
    assert record.commit == git(repo, "rev-parse", "HEAD").strip()
    assert record.tree == git(repo, "rev-parse", "HEAD^{tree}").strip()


@pytest.mark.parametrize(
    "dirt",
    ["modified", "untracked", "ignored_in_package", "staged", "unchecked_pyc"],
)
def test_dirt_is_seen(repo: Path, dirt: str) -> None:
    package = repo / "harness"
    if dirt == "modified":
        (package / "__init__.py").write_text("x = 1\n")
    elif dirt == "untracked":
        (package / "new.py").write_text("")
    elif dirt == "ignored_in_package":
        (package / "debug.log").write_text("ignored by .gitignore, still not the commit")
    elif dirt == "staged":
        (package / "s.py").write_text("")
        git(repo, "add", "harness/s.py")
    else:
        cache = package / "__pycache__"
        cache.mkdir()
        py_compile.compile(
            str(package / "__init__.py"),
            cfile=str(cache / "__init__.cpython-311.pyc"),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    assert bind_source(repo, refuse_dirty=False).tree_state == "dirty"
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("dirty_refused", "dirty")


def test_environment_directories_are_not_dirt(repo: Path) -> None:
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "lib" / "x.py").write_text("")
    cache = repo / "harness" / "__pycache__"
    cache.mkdir()
    py_compile.compile(
        str(repo / "harness" / "__init__.py"), cfile=str(cache / "i.cpython-311.pyc")
    )
    assert git_state(repo).dirty_paths == ()


def test_local_config_cannot_hide_untracked_files(repo: Path) -> None:
    git(repo, "config", "status.showUntrackedFiles", "no")
    (repo / "harness" / "new.py").write_text("")
    assert git_state(repo).dirty_paths == ("harness/new.py",)


def test_user_config_is_not_read(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A global excludes file that ignores everything must not make dirt disappear."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    home.mkdir()
    (home / "ignore-all").write_text("*\n")
    (home / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {home / 'ignore-all'}\n[status]\n\tshowUntrackedFiles = no\n"
    )
    (repo / "harness" / "new.py").write_text("")
    assert git_state(repo).dirty_paths == ("harness/new.py",)


def test_not_a_checkout_is_unread(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: /nonexistent\n")
    record = bind_source(tmp_path, refuse_dirty=False)
    assert (record.category, record.tree_state) == ("unread", "unread")


def _dist(tmp_path: Path) -> tuple[PathDistribution, Path]:
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    module = site / "pkg" / "m.py"
    module.write_bytes(b"A = 1\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"A = 1\n").digest()).rstrip(b"=").decode()
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: pkg\nVersion: 1.0\n")
    (info / "RECORD").write_text(f"pkg/m.py,sha256={digest},6\npkg-1.0.dist-info/RECORD,,\n")
    return PathDistribution(info), module


def test_installed_record_digest_detects_an_edited_file(tmp_path: Path) -> None:
    dist, module = _dist(tmp_path)
    digest, intact = installed_digest(dist)
    assert intact
    module.write_bytes(b"A = 2\n")
    edited, intact_after = installed_digest(dist)
    assert not intact_after
    assert edited != digest


def test_stat_settings_cannot_hide_a_same_size_edit(repo: Path) -> None:
    """With checkStat=minimal and trustctime=false in the repository's own config, git
    would trust a restored mtime and miss a same-size edit; the binding overrides both."""
    import os
    import time

    git(repo, "config", "core.checkStat", "minimal")
    git(repo, "config", "core.trustctime", "false")
    target = repo / "harness" / "__init__.py"
    target.write_text("a = 1\n")
    git(repo, "commit", "-qam", "content")
    time.sleep(1.1)  # leave the racy-git window, so git trusts the index's stat data
    git(repo, "status", "--porcelain")  # refresh the index stat data
    before = target.stat()
    target.write_text("a = 2\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert git(repo, "status", "--porcelain") == "", "precondition: plain git misses it"
    assert git_state(repo).dirty_paths == ("harness/__init__.py",)
