"""The verifier's copy of a workspace has the tree digest of its source."""

from __future__ import annotations

import os
from pathlib import Path

from guest.task import task_digest
from guest.verify.run import verify
from guest.verify.snapshot import copy_regular_tree
from receipts.treedigest import tree_sha256
from tests.guest.support_tasks import apply_solution, scratch, task_copy

__all__ = ["scratch"]


def test_the_verifier_copy_has_the_digest_of_its_source(tmp_path: Path) -> None:
    """copy_regular_tree keeps what the digest covers (bytes, paths, the executable bit),
    so the host's digest of what it carried equals the verifier's of its copy.
    Mutation control: without the chmod in copy_regular_tree, run.sh loses its bit."""
    root = tmp_path / "t"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(b"x = 1\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("/etc/passwd", root / "leak")
    copy_regular_tree(root, tmp_path / "copy")
    assert tree_sha256(tmp_path / "copy") == tree_sha256(root)


def test_the_record_names_the_workspace_as_received(scratch: Path) -> None:
    """workspace_sha256 is the digest of the final workspace as carried (an agent-made
    hidden_tests/ included), not of the copy after the task's hidden tests went in.
    Mutation control: the digest taken after the hidden tests are copied differs."""
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    apply_solution("py-one-line-fix", workspace)
    (workspace / "hidden_tests").mkdir()
    (workspace / "hidden_tests" / "mine.py").write_text("x = 1\n")
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert record.result == "passed"
    assert record.workspace_sha256 == tree_sha256(workspace)
