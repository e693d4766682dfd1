"""Helpers shared by agent and verification tests: task copies in a reachable scratch."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.task import Task, copy_task_private, load_task

TASKS = Path(__file__).parents[2] / "profiles" / "tasks"
TASK_IDS = ("py-one-line-fix", "node-bug-fix", "py-two-file-change")


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A 0755 scratch outside pytest's 0700 tmp tree, so `nobody` can reach it."""
    path = Path(tempfile.mkdtemp(prefix="harness-test-", dir="/var/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def shipped(task_dir: Path, scratch: Path) -> Path:
    """The task as the verification guest holds it: a copy only root can enter."""
    target = scratch / "shipped" / task_dir.name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_task_private(task_dir, target)
    return target


def task_copy(task_id: str, scratch: Path) -> tuple[Task, Path, Path]:
    """The task (shipped as to the verifier) and a copy of its workspace."""
    task_dir = shipped(TASKS / task_id, scratch)
    workspace = scratch / "workspace"
    shutil.copytree(task_dir / "workspace", workspace)
    return load_task(task_dir), task_dir, workspace


def apply_solution(task_id: str, workspace: Path) -> None:
    """The task's scripted solution's edits, applied directly."""
    for step in json.loads((TASKS / task_id / "scripts" / "solution.json").read_text()):
        if step["tool"] == "edit":
            args = step["arguments"]
            path = workspace / args["filePath"]
            text = path.read_text()
            assert text.count(args["oldString"]) == 1
            path.write_text(text.replace(args["oldString"], args["newString"]))
        elif step["tool"] == "write":
            args = step["arguments"]
            (workspace / args["filePath"]).write_text(args["content"])
