"""Coding tasks: `profiles/tasks/<id>/` with task.toml, workspace/ and hidden_tests/.

The agent sees only the workspace and the prompt; `hidden_tests/` reaches the
verifier after the agent and the worker have stopped. The task's identity is the
digest of the pin table of its whole directory (prompt, workspace, hidden tests and
scripted policies alike), so a receipt names exactly the task that was run.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from receipts.pintable import build_pin_table

TaskId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")]
Argv = Annotated[
    tuple[Annotated[str, StringConstraints(min_length=1, max_length=512)], ...],
    Field(min_length=1, max_length=64),
]
RelativePath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$")]
REPORT_PLACEHOLDER = "{report}"
SPLIT_PREFIX = ("python3", "-I", "-m", "pytest")
"""The hidden command a split judgement takes over: the arguments after it go to pytest."""


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TestCommand(_Closed):
    command: Argv
    deadline_s: Annotated[int, Field(ge=1, le=3600)]


TestId = Annotated[
    str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f\x7f]+$")
]


class HiddenTests(TestCommand):
    report: Literal["junit", "tap"]
    """How the hidden test command reports results into the file named by `{report}`."""
    expected: Annotated[tuple[TestId, ...], Field(min_length=1, max_length=10_000)]
    """The hidden tests' IDs as the report names them (guest/verify/reports.py): JUnit
    `classname::name`, TAP leaf test names. The host ships the hidden tests, so it knows
    them; a report naming any other set is `report_inconsistent`."""
    judge: Literal["split", "in_process"] = "split"
    """`split`: pytest and the hidden tests run in a process that never imports the
    agent's code; the solution is served from a second process (guest/verify/split.py).
    `in_process`: the command runs as given and the agent's code runs inside it; a task
    says so only when its tests cannot be split (they patch the solution's module, or
    the command is not pytest), and the verification record says which ran."""

    @field_validator("expected")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("expected test IDs repeat")
        return value


class Task(_Closed):
    id: TaskId
    language: Literal["python", "javascript"]
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=16_384)]
    fixtures: tuple[RelativePath, ...]
    """Workspace files the agent must not change (the visible tests)."""
    tests: TestCommand
    hidden: HiddenTests


class TaskError(ValueError):
    """A task directory that is missing or malformed; the message names what."""


def load_task(task_dir: Path, *, full: bool = True) -> Task:
    """Load and check a task directory. The agent's copy in the guest is task.toml alone
    (its workspace lives elsewhere; hidden_tests/ arrives only for verification): load
    that one with full=False."""
    try:
        data = tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8"))
        task = Task.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TaskError(f"task {task_dir.name}: task.toml unreadable") from exc
    except ValidationError as exc:
        detail = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in detail["loc"])
        raise TaskError(f"task {task_dir.name}: {where}: {detail['msg']}") from exc
    if task.id != task_dir.name:
        raise TaskError(f"task {task_dir.name}: id must equal the directory name")
    if sum(REPORT_PLACEHOLDER in arg for arg in task.hidden.command) != 1:
        raise TaskError(f"task {task_dir.name}: hidden.command must name {REPORT_PLACEHOLDER} once")
    if task.hidden.judge == "split" and tuple(task.hidden.command[:4]) != SPLIT_PREFIX:
        raise TaskError(f"task {task_dir.name}: hidden.judge split needs a pytest command")
    if not full:
        return task
    for part in ("workspace", "hidden_tests"):
        if not (task_dir / part).is_dir():
            raise TaskError(f"task {task_dir.name}: {part}/ is missing")
    for fixture in task.fixtures:
        if not (task_dir / "workspace" / fixture).is_file():
            raise TaskError(f"task {task_dir.name}: fixture {fixture} is not in workspace/")
    return task


def copy_task_private(task_dir: Path, target: Path) -> None:
    """The task as the verifier gets it: the whole directory (its digest unchanged), in a
    directory only its owner (root) can enter. Its hidden tests and reference solution are
    out of reach of the solution's user, and a split judgement refuses a task that is not
    (guest/verify/run.hidden_tests_exposed)."""
    shutil.copytree(task_dir, target, ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(target, 0o700)


def task_digest(task_dir: Path) -> str:
    """SHA-256 of the pin table of the whole task directory."""
    return build_pin_table(task_dir).digest()
