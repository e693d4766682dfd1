"""Source binding against real git repositories and a real RECORD."""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import py_compile
import subprocess
import sys
import threading
from importlib.metadata import PackageNotFoundError, PathDistribution
from pathlib import Path

import pytest

from harness import source
from harness.source import (
    MAX_SUBMODULE_DEPTH,
    SourceUnread,
    _blob_id,
    _submodule_matches,
    bind_source,
    git_state,
    installed_digest,
)

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
    ("dirt", "category"),
    [
        ("modified", "dirty_refused"),
        ("untracked", "dirty_refused"),
        ("ignored_in_package", "dirty_refused"),
        ("staged", "dirty_refused"),
        ("deleted", "dirty_refused"),
        ("executable_bit", "dirty_refused"),
        ("file_to_symlink", "dirty_refused"),
        ("unchecked_pyc", "bytecode_refused"),
        ("timestamp_pyc", "bytecode_refused"),
    ],
)
def test_dirt_is_seen(repo: Path, dirt: str, category: str) -> None:
    package = repo / "harness"
    module = package / "__init__.py"
    if dirt == "modified":
        module.write_text("x = 1\n")
    elif dirt == "untracked":
        (package / "new.py").write_text("")
    elif dirt == "ignored_in_package":
        (package / "debug.log").write_text("ignored by .gitignore, still not the commit")
    elif dirt == "staged":
        (package / "s.py").write_text("")
        git(repo, "add", "harness/s.py")
    elif dirt == "deleted":
        module.unlink()
    elif dirt == "executable_bit":
        module.chmod(0o755)
    elif dirt == "file_to_symlink":
        module.unlink()
        (package / "elsewhere.txt").write_text("")
        module.symlink_to("elsewhere.txt")
    else:
        cache = package / "__pycache__"
        cache.mkdir()
        mode = (
            py_compile.PycInvalidationMode.UNCHECKED_HASH
            if dirt == "unchecked_pyc"
            else py_compile.PycInvalidationMode.TIMESTAMP
        )
        py_compile.compile(
            str(module), cfile=str(cache / "__init__.cpython-311.pyc"), invalidation_mode=mode
        )
    assert bind_source(repo, refuse_dirty=False).tree_state == "dirty"
    assert bind_source(repo, refuse_dirty=False).category == "ok"
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == (category, "dirty")


def test_environment_directories_are_not_dirt(repo: Path) -> None:
    for environment in (".venv/lib", ".hypothesis/constants", "receipts-out/x", "h.egg-info"):
        (repo / environment).mkdir(parents=True)
        (repo / environment / "x.py").write_text("")
    (repo / ".venv" / "lib" / "__pycache__").mkdir()
    assert git_state(repo).dirty_paths == ()
    assert bind_source(repo, refuse_dirty=True).category == "ok"


def test_a_tracked_file_inside_an_environment_directory_is_still_compared(repo: Path) -> None:
    (repo / "build").mkdir()
    (repo / "build" / "kept.py").write_text("A = 1\n")
    git(repo, "add", "-f", "build/kept.py")
    git(repo, "commit", "-qm", "tracked in build/")
    assert git_state(repo).dirty_paths == ()
    (repo / "build" / "kept.py").write_text("A = 2\n")
    assert git_state(repo).dirty_paths == ("build/kept.py",)


@pytest.mark.parametrize("hint", ["--assume-unchanged", "--skip-worktree"])
def test_index_hints_cannot_hide_an_edit(repo: Path, hint: str) -> None:
    """git status trusts these index bits and reports a modified file as unchanged; the
    binding hashes the file itself."""
    module = repo / "harness" / "__init__.py"
    module.write_text("import os; os.system('true')\n")
    git(repo, "update-index", hint, "harness/__init__.py")
    assert git(repo, "status", "--porcelain") == "", "precondition: git status calls it clean"
    assert git_state(repo).dirty_paths == ("harness/__init__.py",)
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("dirty_refused", "dirty")


def _with_submodule(repo: Path, tmp_path: Path) -> Path:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "lib.py").write_text("A = 1\n")
    git(upstream, "init", "-q")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "lib")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "sub")
    git(repo, "commit", "-qm", "submodule")
    return repo / "sub"


def test_submodule_clean_and_ignored_edit(repo: Path, tmp_path: Path) -> None:
    """`submodule.<name>.ignore=all` hides an edited submodule from git status; the binding
    checks the submodule's own tree whatever that setting says."""
    sub = _with_submodule(repo, tmp_path)
    assert bind_source(repo, refuse_dirty=True).category == "ok"
    (sub / "lib.py").write_text("A = 2\n")
    git(repo, "config", "submodule.sub.ignore", "all")
    assert git(repo, "status", "--porcelain") == "", "precondition: git status calls it clean"
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("submodule_refused", "dirty")


def test_submodule_at_another_commit_is_dirt(repo: Path, tmp_path: Path) -> None:
    sub = _with_submodule(repo, tmp_path)
    (sub / "lib.py").write_text("A = 3\n")
    git(sub, "commit", "-qam", "moved")
    git(repo, "config", "submodule.sub.ignore", "all")
    assert git(repo, "status", "--porcelain") == ""
    assert bind_source(repo, refuse_dirty=True).category == "submodule_refused"


def test_core_worktree_pointing_at_a_clean_copy_is_refused(repo: Path, tmp_path: Path) -> None:
    """The checkout's files are edited and `core.worktree` shows git a clean clone: git
    status calls it clean, the binding refuses the pointer (and still sees the edit)."""
    clean = tmp_path / "clean-copy"
    git(tmp_path, "clone", "-q", str(repo), str(clean))
    (repo / "harness" / "__init__.py").write_text("EVIL = 1\n")
    git(repo, "config", "core.worktree", str(clean))
    assert git(repo, "status", "--porcelain") == "", "precondition: git status calls it clean"
    state = git_state(repo)
    assert state.dirt == ("git_location", "files")
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("git_location_refused", "dirty")


def test_core_worktree_naming_the_checkout_itself_is_fine(repo: Path) -> None:
    git(repo, "config", "core.worktree", "..")
    assert bind_source(repo, refuse_dirty=True).category == "ok"


@pytest.mark.parametrize("variable", ["GIT_DIR", "GIT_WORK_TREE"])
def test_caller_git_variables_pointing_elsewhere_are_refused(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    monkeypatch.setenv(variable, str(other / ".git" if variable == "GIT_DIR" else other))
    assert bind_source(repo, refuse_dirty=True).category == "git_location_refused"
    monkeypatch.setenv(variable, str(repo / ".git" if variable == "GIT_DIR" else repo))
    assert bind_source(repo, refuse_dirty=True).category == "ok"


def test_forged_timestamp_pyc_runs_and_is_refused(repo: Path) -> None:
    """A timestamp .pyc compiled from other code, stamped with the real source's mtime
    and size: Python runs it in place of the unchanged, committed source."""
    module = repo / "harness" / "m.py"
    module.write_text("VALUE = 1\n")
    git(repo, "add", "harness/m.py")
    git(repo, "commit", "-qm", "m")
    before = module.stat()
    forged_source = repo.parent / "forged.py"
    forged_source.write_text("VALUE = 2\n")  # the same size as the real source
    os.utime(forged_source, ns=(before.st_atime_ns, before.st_mtime_ns))
    cache = repo / "harness" / "__pycache__"
    cache.mkdir()
    tag = sys.implementation.cache_tag
    py_compile.compile(str(forged_source), cfile=str(cache / f"m.{tag}.pyc"))
    ran = subprocess.run(
        [sys.executable, "-c", "import harness.m; print(harness.m.VALUE)"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert ran == "2", "precondition: the forged bytecode is what runs"
    assert git(repo, "status", "--porcelain") == "", "precondition: git status calls it clean"
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("bytecode_refused", "dirty")


def test_replace_refs_cannot_substitute_the_tree(repo: Path) -> None:
    """`git replace` makes plain git read another tree for HEAD's tree id; the binding
    reads the real objects, so the edited file does not match and the tree id stays."""
    module = repo / "harness" / "__init__.py"
    real_tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    git(repo, "checkout", "-qb", "side")
    module.write_text("EVIL = 1\n")
    git(repo, "commit", "-qam", "evil")
    evil_tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    git(repo, "checkout", "-q", "-")
    module.write_text("EVIL = 1\n")
    git(repo, "replace", real_tree, evil_tree)
    assert "EVIL" in git(repo, "show", "HEAD:harness/__init__.py"), "precondition"
    record = bind_source(repo, refuse_dirty=True)
    assert (record.category, record.tree) == ("dirty_refused", real_tree)


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
    would trust a restored mtime and miss a same-size edit; the binding hashes the file."""
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


def test_a_pycache_prefix_outside_the_tree_is_refused(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a pycache prefix Python reads bytecode from outside the checkout, where the
    tree check cannot see a forged .pyc."""
    assert bind_source(repo, refuse_dirty=True).category == "ok"
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "elsewhere"))
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("bytecode_refused", "dirty")


def test_submodules_nested_past_the_bound_are_dirt(repo: Path, tmp_path: Path) -> None:
    """A clean submodule matches at the deepest level checked, and not one level below:
    nesting past MAX_SUBMODULE_DEPTH is never taken as clean unchecked. Mutation control
    (cosmic-ray): the bound's `return False` as `return True` fails this test."""
    sub = _with_submodule(repo, tmp_path)
    commit = git(sub, "rev-parse", "HEAD").strip()
    assert _submodule_matches(sub, commit, MAX_SUBMODULE_DEPTH - 1)
    assert not _submodule_matches(sub, commit, MAX_SUBMODULE_DEPTH)


@pytest.mark.parametrize(
    "case",
    [
        # edited, refuse_dirty -> category, tree_state
        (False, True, "ok", "clean"),
        (True, True, "dirty_refused", "dirty"),
        (True, False, "ok", "dirty"),
    ],
)
def test_an_installed_harness_is_bound_by_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[bool, bool, str, str]
) -> None:
    """No checkout: the installed distribution's RECORD decides, and an edited file is
    refused only for a dispatched trial. The distribution is a real dist-info on disk,
    found under the name bind_source asks for. Mutation controls (cosmic-ray): `not intact
    and refuse_dirty` as `not not intact and ...` or as `not intact or refuse_dirty` fail
    this test."""
    edited, refuse_dirty, category, tree_state = case
    dist, module = _dist(tmp_path)
    if edited:
        module.write_bytes(b"A = 2\n")
    asked: list[str] = []

    def found(name: str) -> PathDistribution:
        asked.append(name)
        return dist

    monkeypatch.setattr(source, "distribution", found)
    record = bind_source(None, refuse_dirty=refuse_dirty)
    assert asked == ["harness"]
    assert (record.kind, record.category, record.tree_state) == ("installed", category, tree_state)
    assert record.installed_record_sha256 == installed_digest(dist)[0]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_record_hash_that_is_not_base64_is_an_edit_not_a_crash(tmp_path: Path, cut: int) -> None:
    """A RECORD line whose sha256 is cut (41 of 43 characters is not valid base64 at any
    padding) made installed_digest raise binascii.Error, so `harness trial` from an
    installed package crashed instead of recording the tree; found by cosmic-ray's
    `% 4` -> `% 3` mutant of the padding. Now the file counts as edited (fail closed)."""
    dist, _module = _dist(tmp_path)
    record = Path(str(dist.locate_file("pkg-1.0.dist-info/RECORD")))
    line, rest = record.read_text().split("\n", 1)
    path, value, size = line.split(",")
    record.write_text(f"{path},{value[:-cut]},{size}\n{rest}")
    _digest, intact = installed_digest(dist)
    assert not intact


def test_a_nested_submodule_counts_one_level_per_nesting(repo: Path, tmp_path: Path) -> None:
    """A clean submodule holding a clean submodule matches when the outer one sits two
    levels above the bound: each nesting costs one level. Mutation control (cosmic-ray):
    `depth + 1` as `depth + 2` in _submodule_matches refuses it."""
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "deep.py").write_text("B = 1\n")
    git(inner, "init", "-q")
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "inner")
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "lib.py").write_text("A = 1\n")
    git(outer, "init", "-q")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "in")
    git(outer, "add", "-A")
    git(outer, "commit", "-qm", "outer")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(outer), "out")
    git(
        repo,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "update",
        "-q",
        "--init",
        "--recursive",
    )
    git(repo, "commit", "-qm", "nested")
    sub = repo / "out"
    assert (sub / "in" / "deep.py").is_file()
    commit = git(sub, "rev-parse", "HEAD").strip()
    assert bind_source(repo, refuse_dirty=True).category == "ok"
    assert _submodule_matches(sub, commit, MAX_SUBMODULE_DEPTH - 2)


def test_nesting_past_the_bound_refuses_the_whole_checkout(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the bound at 1, the submodule inside the submodule is past it: the checkout
    is refused. Mutation control (cosmic-ray): `depth + 1` as `depth + 0` or `depth - 1`
    never reaches the bound and calls it clean."""
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "deep.py").write_text("B = 1\n")
    git(inner, "init", "-q")
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "inner")
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    git(outer, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "in")
    git(outer, "commit", "-qm", "outer")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(outer), "out")
    git(
        repo,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "update",
        "-q",
        "--init",
        "--recursive",
    )
    git(repo, "commit", "-qm", "nested")
    assert bind_source(repo, refuse_dirty=True).category == "ok"
    monkeypatch.setattr(source, "MAX_SUBMODULE_DEPTH", 1)
    assert bind_source(repo, refuse_dirty=True).category == "submodule_refused"


def test_a_clean_executable_file_is_clean(repo: Path) -> None:
    """Mode 100755 in HEAD with the bit set on disk matches; the bit cleared is dirt.
    Mutation control (cosmic-ray): `"100755": True` as False in _BLOB_MODES fails this."""
    script = repo / "harness" / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "script")
    assert bind_source(repo, refuse_dirty=True).category == "ok"
    script.chmod(0o644)
    assert bind_source(repo, refuse_dirty=True).category == "dirty_refused"


def test_an_untracked_symlink_to_a_directory_is_dirt_not_walked(repo: Path, tmp_path: Path) -> None:
    """A link to an empty directory elsewhere holds no file to find: it is dirt itself.
    Mutation control (cosmic-ray): `is_dir(follow_symlinks=False)` as True walks into the
    empty target and calls the checkout clean."""
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    (repo / "harness" / "linked").symlink_to(elsewhere)
    assert git_state(repo).dirty_paths == ("harness/linked",)


def test_a_blob_is_never_read_through_a_symlink(tmp_path: Path) -> None:
    """_blob_id opens with O_NOFOLLOW: a regular file swapped for a link after the lstat is
    not hashed as the link's target. Mutation control (cosmic-ray): `O_NOFOLLOW |
    O_NONBLOCK` as `O_NOFOLLOW & O_NONBLOCK` (both flags dropped) reads the target."""
    target = tmp_path / "target"
    target.write_text("x\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError) as raised:
        _blob_id("sha1", os.fsencode(link), False)
    assert raised.value.errno == errno.ELOOP


def test_a_directory_that_cannot_be_listed_is_dirt(repo: Path) -> None:
    """Untracked directories nested past PATH_MAX: the walk cannot list the deepest (the
    OS refuses the name), and that is dirt, not a crash and not a skip. Mutation control
    (cosmic-ray): _walk's `except OSError` made dead lets the error out of bind_source."""
    start = os.getcwd()
    os.chdir(repo / "harness")
    try:
        for _ in range(18):  # 18 * 251 bytes > 4,096
            os.mkdir("d" * 250)
            os.chdir("d" * 250)
    finally:
        os.chdir(start)
    refused = bind_source(repo, refuse_dirty=True)
    assert (refused.category, refused.tree_state) == ("dirty_refused", "dirty")


def test_a_checkout_without_a_git_dir_is_unread(tmp_path: Path) -> None:
    """Mutation control (cosmic-ray): resolve_git_dir's `except OSError` made dead lets
    FileNotFoundError out instead of SourceUnread."""
    with pytest.raises(SourceUnread):
        git_state(tmp_path)


def test_a_file_record_lists_but_that_is_gone_is_an_edit(tmp_path: Path) -> None:
    """Mutation control (cosmic-ray): installed_digest's `except OSError` made dead lets
    FileNotFoundError out instead of counting the file as not intact."""
    dist, module = _dist(tmp_path)
    module.unlink()
    assert installed_digest(dist)[1] is False


def test_no_installed_harness_is_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation control (cosmic-ray): bind_source's `except PackageNotFoundError` made
    dead lets the error out instead of an `unread` record."""

    def absent(name: str) -> PathDistribution:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(source, "distribution", absent)
    record = bind_source(None, refuse_dirty=True)
    assert (record.kind, record.category, record.tree_state) == ("installed", "unread", "unread")


def test_only_sha256_record_hashes_are_compared(tmp_path: Path) -> None:
    """RECORD may name other algorithms; those files are listed, not compared (as the
    docstring says), and an empty sha256 is no hash. Mutation control (cosmic-ray):
    `algorithm != "sha256" or not encoded` as `and` compares them and fails this."""
    dist, _module = _dist(tmp_path)
    record = Path(str(dist.locate_file("pkg-1.0.dist-info/RECORD")))
    line, rest = record.read_text().split("\n", 1)
    path, _value, size = line.split(",")
    for value in ("sha512=AAAA", "sha256="):
        record.write_text(f"{path},{value},{size}\n{rest}")
        assert installed_digest(dist)[1] is True, value


def test_a_tracked_file_turned_into_a_link_to_the_same_bytes_is_dirt(
    repo: Path, tmp_path: Path
) -> None:
    """Only the file's type changed (a symlink to an outside copy of the same bytes), and
    nothing else is untracked. Mutation control (cosmic-ray): _matches' `return False`
    for a non-regular entry as `return True` calls this clean."""
    module = repo / "harness" / "__init__.py"
    outside = tmp_path / "copy.py"
    outside.write_bytes(module.read_bytes())
    module.unlink()
    module.symlink_to(outside)
    assert git_state(repo).dirty_paths == ("harness/__init__.py",)


def test_the_walk_goes_on_after_bytecode(repo: Path) -> None:
    """Every kind of dirt is listed, not just the first met. Mutation control (cosmic-ray):
    the `continue` after a bytecode entry as `break` drops the untracked file after it."""
    (repo / "harness" / "__pycache__").mkdir()
    (repo / "harness" / "zz_new.py").write_text("")
    state = git_state(repo)
    assert state.dirty_paths == ("harness/__pycache__", "harness/zz_new.py")
    assert state.dirt == ("bytecode", "files")


def test_the_binding_takes_milliseconds_not_the_clock(repo: Path) -> None:
    """duration_ms is the time bind_source took. Mutation control (cosmic-ray): `monotonic()
    - started` as `+ started` records the clock's reading instead."""
    assert 0 < bind_source(repo, refuse_dirty=True).duration_ms < 60_000  # git runs: >= 1 ms


def test_a_tracked_symlink_is_compared_by_its_target(repo: Path) -> None:
    """A symlink in HEAD matches when its target is the committed one; retargeted, or
    replaced by a regular file holding the target's text, it is dirt. Mutation controls
    (cosmic-ray, _matches and _blob_id's link branch): `== oid` as `!=`, `and` as `or`,
    `_blob_id(..., True)` as False, and the header's `%` as `//` each fail this test."""
    link = repo / "harness" / "alias.py"
    link.symlink_to("__init__.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    assert git_state(repo).dirty_paths == ()
    link.unlink()
    link.symlink_to("other.py")
    assert git_state(repo).dirty_paths == ("harness/alias.py",)
    link.unlink()
    link.write_text("__init__.py")
    assert git_state(repo).dirty_paths == ("harness/alias.py",)


def test_a_fifo_in_place_of_a_file_is_not_waited_on(tmp_path: Path) -> None:
    """_blob_id opens with O_NONBLOCK: a FIFO swapped in after the lstat gives None at
    once instead of blocking the binding until a writer comes. Mutation control
    (cosmic-ray): `O_NONBLOCK | O_CLOEXEC` as `O_NONBLOCK & O_CLOEXEC` (both dropped)
    blocks in open, and this test fails after 5 s."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    results: list[str | None] = []
    reader = threading.Thread(
        target=lambda: results.append(_blob_id("sha1", os.fsencode(fifo), False)), daemon=True
    )
    reader.start()
    reader.join(5)
    blocked = reader.is_alive()
    if blocked:  # unblock the mutant's open before failing
        with open(fifo, "wb"):
            pass
        reader.join(5)
    assert not blocked
    assert results == [None]


def test_an_uninitialised_submodule_is_dirt(repo: Path, tmp_path: Path) -> None:
    """A clone without its submodules: the gitlink's directory is empty, so the code
    HEAD names is not there. Mutation control (cosmic-ray): _submodule_matches'
    `except SourceUnread: return False` as `return True` calls it clean."""
    _with_submodule(repo, tmp_path)
    git(repo, "submodule", "deinit", "-q", "-f", "sub")
    assert not any((repo / "sub").iterdir())
    assert bind_source(repo, refuse_dirty=True).category == "submodule_refused"
