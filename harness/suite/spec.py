"""A suite file (`profiles/suites/NAME.toml`) and the member trials it expands to.

Why a file and not flags: a suite is what a reader of its receipt must be able to
re-run, so its digest goes into `suite.json` and its members are a pure function of it
and of the tasks present (tasks by names or globs, profiles, agents, repeats):

    name = "polyglot-python-controls"
    tasks = ["polyglot-py-*"]          # names or fnmatch globs over profiles/tasks/
    profiles = ["tiny"]
    agents = ["scripted:oracle", "scripted:null"]   # or "model"
    repeats = 1

`scripted:NAME` is each task's own `scripts/NAME.json` (the polyglot oracle and null
controls live there), so one suite runs every task's controls.
"""

from __future__ import annotations

import fnmatch
import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from guest.task import TaskError, load_task
from harness.profiles import Profile, ProfileError, load_profile
from receipts.vocabulary import AccelRequest, Backend

Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")]
TaskPattern = Annotated[str, StringConstraints(pattern=r"^[a-z0-9*?\[\]][a-z0-9_.*?\[\]-]{0,63}$")]
Agent = Annotated[str, StringConstraints(pattern=r"^(?:model|scripted:[a-z0-9][a-z0-9_.-]{0,63})$")]
MAX_MEMBERS = 10_000


class SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    tasks: Annotated[tuple[TaskPattern, ...], Field(min_length=1, max_length=1000)]
    profiles: Annotated[tuple[Name, ...], Field(min_length=1, max_length=16)]
    agents: Annotated[tuple[Agent, ...], Field(min_length=1, max_length=16)]
    repeats: Annotated[int, Field(ge=1, le=1000)] = 1
    backend: Backend = "qemu"
    accel: AccelRequest = "auto"


class SuiteError(ValueError):
    """A suite file that cannot be run; the message names what."""


@dataclass(frozen=True)
class Member:
    """One trial of the suite, before it runs."""

    member_id: str
    task: str
    language: Literal["python", "javascript"]
    profile: Profile
    agent: str
    script: Path | None
    repeat: int


@dataclass(frozen=True)
class Suite:
    file: SuiteFile
    sha256: str
    """SHA-256 of the suite file's bytes as read."""
    members: tuple[Member, ...]


def resolve_tasks(patterns: tuple[str, ...], tasks_dir: Path) -> tuple[str, ...]:
    """Task ids matching the patterns, in pattern order then name order, each once; a
    pattern that matches nothing is an error (a typo must not shrink the suite)."""
    present = sorted(p.name for p in tasks_dir.iterdir() if (p / "task.toml").is_file())
    chosen: list[str] = []
    for pattern in patterns:
        matched = [name for name in present if fnmatch.fnmatchcase(name, pattern)]
        if not matched:
            raise SuiteError(f"tasks: {pattern} matches no task")
        chosen += [name for name in matched if name not in chosen]
    return tuple(chosen)


def load_suite(path: Path, tasks_dir: Path) -> Suite:
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
        spec = SuiteFile.model_validate(data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SuiteError(f"{path.name}: unreadable") from exc
    except ValidationError as exc:
        detail = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in detail["loc"])
        raise SuiteError(f"{path.name}: {where}: {detail['msg']}") from exc
    try:
        profiles = [load_profile(name) for name in spec.profiles]
    except ProfileError as exc:
        raise SuiteError(str(exc)) from exc
    members: list[Member] = []
    for task_id in resolve_tasks(spec.tasks, tasks_dir):
        try:
            task = load_task(tasks_dir / task_id)
        except TaskError as exc:
            raise SuiteError(str(exc)) from exc
        for profile in profiles:
            for agent in spec.agents:
                script = None
                if agent != "model":
                    script = (
                        tasks_dir / task_id / "scripts" / f"{agent.removeprefix('scripted:')}.json"
                    )
                    if not script.is_file():
                        raise SuiteError(f"{task_id}: no scripts/{script.name} for {agent}")
                for repeat in range(spec.repeats):
                    members.append(
                        Member(
                            member_id=f"{len(members):04d}",
                            task=task_id,
                            language=task.language,
                            profile=profile,
                            agent=agent,
                            script=script,
                            repeat=repeat,
                        )
                    )
    if len(members) > MAX_MEMBERS:
        raise SuiteError(f"{len(members)} members: at most {MAX_MEMBERS}")
    return Suite(file=spec, sha256=hashlib.sha256(raw).hexdigest(), members=tuple(members))
