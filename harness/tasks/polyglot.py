"""Import Aider's polyglot benchmark (Exercism practice exercises) into our task format.

Why an importer and not hand-written tasks: people evaluate a model over a benchmark,
and three tasks of our own prove nothing about one. Each exercise becomes
`profiles/tasks/polyglot-<lang>-<slug>/`:

- `task.toml`: the prompt (a fixed header naming the solution and test files, then
  `.docs/instructions.md` and `.docs/instructions.append.md`), the visible test command,
  and the hidden test command with the exact test IDs its report must name;
- `workspace/`: the stub the exercise ships, its test files (the visible tests, marked
  as fixtures the agent must not change) and a `pytest.ini`;
- `hidden_tests/`: the same test files, a fresh copy the agent never sees;
- `scripts/oracle.json`: writes `.meta/example.*` over the stub, runs the tests, finishes;
  `scripts/null.json`: finishes at once, leaving the stub; `scripts/runner_patch.json`:
  writes the stub with the test runner patched when it is imported (RUNNER_PATCH), the
  control that a solution's code cannot pass tests by reaching the test runner;
- `ATTRIBUTION.md`: where the exercise came from (repository, commit, path, licence).

Before an exercise is kept, its hidden tests run on this host twice, on fresh copies:
with the example solution every test must pass (the report's IDs become `expected`),
and with the stub at least one must fail while the report still names exactly those
tests (a stub that does not import reads as an inconsistent report). An exercise that
breaks either, or that our task format cannot hold, is left out with a closed reason.
The real check is the oracle and null suite on real VMs; this one only keeps a broken
task out of the tree.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from guest.task import TaskError, load_task, task_digest
from guest.verify.reports import ReportUnreadable, junit_counts, junit_ids

Language = Literal["python", "javascript"]
LeftOut = Literal[
    "config_unreadable",
    "files_unsupported",
    "prompt_too_long",
    "runner_unavailable",
    "oracle_fails_on_host",
    "null_passes_on_host",
    "null_report_inconsistent",
    "host_check_failed",
]
"""Why an exercise was not imported (closed, so the index can be read by machines)."""

SOURCE_REPOSITORY = "https://github.com/Aider-AI/polyglot-benchmark"
LICENCE = "MIT (Exercism language tracks; Copyright (c) 2021 Exercism)"
PROMPT_LIMIT = 16_384
"""guest/task.py's prompt ceiling."""
HOST_CHECK_DEADLINE_S = 300
VISIBLE_DEADLINE_S = 120
HIDDEN_DEADLINE_S = 300
"""Generous: under TCG a pytest run is about ten times slower than on the host."""
_SAFE_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.py$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
PYTEST = ("python3", "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest")
PYTEST_INI = "[pytest]\npythonpath = .\n"
HIDDEN_PYTEST_INI = (
    "[pytest]\n"
    "# Relative to this file: the workspace root, so hidden tests import the code under test.\n"
    "pythonpath = ..\n"
)


@dataclass(frozen=True)
class Exercise:
    slug: str
    root: Path
    solution: tuple[str, ...]
    tests: tuple[str, ...]
    examples: tuple[str, ...]


@dataclass(frozen=True)
class Imported:
    task_id: str
    slug: str
    digest: str
    tests: int


@dataclass(frozen=True)
class Skipped:
    slug: str
    reason: LeftOut


@dataclass(frozen=True)
class ImportResult:
    language: Language
    commit: str
    imported: tuple[Imported, ...]
    skipped: tuple[Skipped, ...]


class ImportRefused(ValueError):
    """The source directory or the target cannot be used at all; the message says why."""


def task_id_for(language: Language, slug: str) -> str:
    return f"polyglot-{'py' if language == 'python' else 'js'}-{slug}"


def _exercise(root: Path) -> Exercise | LeftOut:
    try:
        config = json.loads((root / ".meta" / "config.json").read_text(encoding="utf-8"))
        files = config["files"]
        solution = tuple(str(name) for name in files["solution"])
        tests = tuple(str(name) for name in files["test"])
        examples = tuple(str(name) for name in files["example"])
    except (OSError, ValueError, KeyError, TypeError):
        return "config_unreadable"
    names = (*solution, *tests)
    plain = all(_SAFE_FILE.fullmatch(name) for name in names)
    examples_ok = all(
        name.startswith(".meta/") and _SAFE_FILE.fullmatch(name.removeprefix(".meta/"))
        for name in examples
    )
    if not (plain and examples_ok) or len(solution) != 1 or len(examples) != 1 or not tests:
        return "files_unsupported"
    if not all((root / name).is_file() for name in (*names, *examples)):
        return "files_unsupported"
    return Exercise(root.name, root, solution, tests, examples)


def prompt_for(exercise: Exercise) -> str:
    """The header the agent needs (which file, how to test), then Exercism's text."""
    docs = exercise.root / ".docs"
    parts = [
        f"Solve this exercise by editing `{exercise.solution[0]}` in the workspace. "
        f"The tests are in {', '.join(f'`{name}`' for name in exercise.tests)}; run them "
        "with the run_tests tool and do not change them. Call finish when done.",
    ]
    for name in ("instructions.md", "instructions.append.md"):
        path = docs / name
        if path.is_file():
            parts.append(path.read_text(encoding="utf-8").strip())
    return "\n\n".join(parts) + "\n"


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are a subset TOML accepts)."""
    return json.dumps(text, ensure_ascii=False)


def _toml_array(items: Sequence[str]) -> str:
    return "[" + ", ".join(_toml_string(item) for item in items) + "]"


def patches_solution(exercise: Exercise) -> bool:
    """Whether the tests patch a name in the solution's module with an object made by
    `new_callable` (paasio: `patch("paasio.super", new_callable=SuperMock)`): the solution
    would have to drive that judge object by reference, which the split judge never lends,
    so such a task declares `hidden.judge = "in_process"`. A patch with a callable the
    judge keeps (grep: `patch("grep.open", side_effect=...)`) is set in the solution's
    module as a callback and stays split."""
    module = re.escape(exercise.solution[0].removesuffix(".py"))
    pattern = re.compile(r"patch\(\s*[\"']" + module + r"\.\w+[\"'][^)]*\bnew_callable\s*=")
    return any(
        pattern.search((exercise.root / name).read_text(encoding="utf-8"))
        for name in exercise.tests
    )


def task_toml(
    task_id: str,
    prompt: str,
    tests: tuple[str, ...],
    expected: Sequence[str],
    judge: Literal["split", "in_process"] = "split",
) -> str:
    hidden = (
        *PYTEST,
        "-c",
        "hidden_tests/pytest.ini",
        "--rootdir",
        ".",
        "--junitxml",
        "{report}",
        "hidden_tests",
    )
    lines = [
        f"id = {_toml_string(task_id)}",
        'language = "python"',
        f"prompt = {_toml_string(prompt)}",
        f"fixtures = {_toml_array(tests)}",
        "",
        "[tests]",
        f"command = {_toml_array((*PYTEST, *tests))}",
        f"deadline_s = {VISIBLE_DEADLINE_S}",
        "",
        "[hidden]",
        f"command = {_toml_array(hidden)}",
        'report = "junit"',
        *(['judge = "in_process"'] if judge == "in_process" else []),
        "expected = [",
        *(f"    {_toml_string(test_id)}," for test_id in expected),
        "]",
        f"deadline_s = {HIDDEN_DEADLINE_S}",
        "",
    ]
    return "\n".join(lines)


RUNNER_PATCH = "import unittest\nunittest.TestCase.run = lambda self, result=None: None\n"
"""Planted at the top of the stub: in one process with unittest-style hidden tests it makes
every one of them "pass" (docs/verification.md)."""


def _write_then_finish(path: str, content: str) -> str:
    steps = [
        {"tool": "write", "arguments": {"filePath": path, "content": content}},
        {"tool": "finish", "arguments": {}},
    ]
    return json.dumps(steps, indent=1, ensure_ascii=False) + "\n"


def _scripts(exercise: Exercise) -> dict[str, str]:
    """The controls each task carries: name -> scripted policy (JSON)."""
    example = (exercise.root / exercise.examples[0]).read_text(encoding="utf-8")
    oracle = [
        {"tool": "write", "arguments": {"filePath": exercise.solution[0], "content": example}},
        {"tool": "run_tests", "arguments": {}},
        {"tool": "finish", "arguments": {}},
    ]
    scripts = {
        "oracle": json.dumps(oracle, indent=1, ensure_ascii=False) + "\n",
        "null": json.dumps([{"tool": "finish", "arguments": {}}], indent=1) + "\n",
    }
    if exercise.solution[0].endswith(".py"):
        stub = (exercise.root / exercise.solution[0]).read_text(encoding="utf-8")
        scripts["runner_patch"] = _write_then_finish(exercise.solution[0], RUNNER_PATCH + stub)
    return scripts


def _attribution(exercise: Exercise, language: Language, commit: str) -> str:
    return (
        f"# Source\n\nExercise `{exercise.slug}` of the {language} track, imported by\n"
        f"`harness tasks import polyglot` from {SOURCE_REPOSITORY}\n"
        f"at commit {commit}, path `{language}/exercises/practice/{exercise.slug}`.\n\n"
        f"Licence: {LICENCE}. The exercise text, stub, tests and example solution are\n"
        "Exercism's; only the layout is ours.\n"
    )


def _lay_out(exercise: Exercise, target: Path) -> None:
    """workspace/ (stub, visible tests, pytest.ini) and hidden_tests/ under `target`."""
    workspace = target / "workspace"
    workspace.mkdir(parents=True)
    shutil.copyfile(exercise.root / exercise.solution[0], workspace / exercise.solution[0])
    for name in exercise.tests:
        shutil.copyfile(exercise.root / name, workspace / name)
    (workspace / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    hidden = target / "hidden_tests"
    hidden.mkdir()
    for name in exercise.tests:
        shutil.copyfile(exercise.root / name, hidden / name)
    (hidden / "pytest.ini").write_text(HIDDEN_PYTEST_INI, encoding="utf-8")


@dataclass(frozen=True)
class HostRun:
    ids: tuple[str, ...]
    passed: int
    total: int


def _host_hidden_run(exercise: Exercise, with_example: bool) -> HostRun | None:
    """The hidden tests on a fresh copy on this host, as the verifier runs them (the
    example over the stub, or the stub); None when pytest wrote no readable report."""
    with tempfile.TemporaryDirectory(prefix="harness-polyglot-") as tmp:
        root = Path(tmp)
        _lay_out(exercise, root)
        if with_example:
            shutil.copyfile(
                exercise.root / exercise.examples[0], root / "workspace" / exercise.solution[0]
            )
        shutil.move(root / "hidden_tests", root / "workspace" / "hidden_tests")
        report = root / "report.xml"
        argv = [
            sys.executable,
            *PYTEST[1:],
            "-c",
            "hidden_tests/pytest.ini",
            "--rootdir",
            ".",
            "--junitxml",
            str(report),
            "hidden_tests",
        ]
        try:
            subprocess.run(
                argv,
                cwd=root / "workspace",
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=HOST_CHECK_DEADLINE_S,
                check=False,
            )
            data = report.read_bytes()
            counts = junit_counts(data)
            ids = junit_ids(data)
        except (OSError, subprocess.TimeoutExpired, ReportUnreadable):
            return None
        total = counts.passed + counts.failed + counts.errored + counts.skipped
        return HostRun(ids=ids, passed=counts.passed, total=total)


def check_on_host(exercise: Exercise) -> tuple[str, ...] | LeftOut:
    """The expected hidden test IDs, or why the exercise is left out."""
    oracle = _host_hidden_run(exercise, with_example=True)
    if oracle is None:
        return "host_check_failed"
    if oracle.total == 0 or oracle.passed != oracle.total or len(set(oracle.ids)) != oracle.total:
        return "oracle_fails_on_host"
    null = _host_hidden_run(exercise, with_example=False)
    if null is None:
        return "host_check_failed"
    if null.passed == null.total:
        return "null_passes_on_host"
    if sorted(null.ids) != sorted(oracle.ids):
        # The stub does not even import (it lacks a name the tests import): the report
        # names a collection error, not the tests, and the verifier calls that
        # `report_inconsistent` (failed_verification), so the null control could never
        # read `task_incomplete`.
        return "null_report_inconsistent"
    return tuple(sorted(oracle.ids))


def build_task(exercise: Exercise, language: Language, commit: str, target: Path) -> int:
    """Write the task into `target` (a directory being staged); the hidden test count."""
    task_id = task_id_for(language, exercise.slug)
    expected = check_on_host(exercise)
    if isinstance(expected, str):
        raise _Skip(expected)
    prompt = prompt_for(exercise)
    if len(prompt) > PROMPT_LIMIT:
        raise _Skip("prompt_too_long")
    _lay_out(exercise, target)
    (target / "task.toml").write_text(
        task_toml(
            task_id,
            prompt,
            exercise.tests,
            expected,
            "in_process" if patches_solution(exercise) else "split",
        ),
        encoding="utf-8",
    )
    scripts = target / "scripts"
    scripts.mkdir()
    for name, script in _scripts(exercise).items():
        (scripts / f"{name}.json").write_text(script, encoding="utf-8")
    (target / "ATTRIBUTION.md").write_text(
        _attribution(exercise, language, commit), encoding="utf-8"
    )
    return len(expected)


class _Skip(Exception):
    def __init__(self, reason: LeftOut) -> None:
        super().__init__(reason)
        self.reason = reason


def source_commit(directory: Path, given: str | None) -> str:
    """The benchmark's commit: given, or read from a git work tree at `directory`."""
    if given is not None:
        commit = given
    else:
        try:
            commit = subprocess.run(
                ["git", "-C", str(directory), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            raise ImportRefused(
                "DIR is not a git checkout: name the source commit with --commit"
            ) from None
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ImportRefused("the source commit must be 40 lower-case hex digits")
    return commit


def import_polyglot(
    directory: Path,
    language: Language,
    tasks_dir: Path,
    commit: str,
    only: Sequence[str] = (),
) -> ImportResult:
    """Import every practice exercise of `language` under `directory` into `tasks_dir`.

    An exercise whose task directory already exists is refused (nothing is overwritten);
    remove it first to re-import."""
    practice = directory / language / "exercises" / "practice"
    if not practice.is_dir():
        raise ImportRefused(f"{language}/exercises/practice is not in DIR")
    imported: list[Imported] = []
    skipped: list[Skipped] = []
    for root in sorted(practice.iterdir()):
        if not root.is_dir() or (only and root.name not in only):
            continue
        if not _SLUG.fullmatch(root.name):
            skipped.append(Skipped(root.name, "files_unsupported"))
            continue
        if language == "javascript":
            # Exercism's JS tests need jest and babel (~50 MB of node_modules), which the
            # guest image does not carry: the guest runs `node --test` only.
            skipped.append(Skipped(root.name, "runner_unavailable"))
            continue
        exercise = _exercise(root)
        if isinstance(exercise, str):
            skipped.append(Skipped(root.name, exercise))
            continue
        target = tasks_dir / task_id_for(language, exercise.slug)
        if target.exists():
            raise ImportRefused(f"{target.name} already exists; remove it to re-import")
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.import-", dir=tasks_dir))
            try:
                staged = staging / target.name  # load_task wants the id as the name
                tests = build_task(exercise, language, commit, staged)
                load_task(staged)
                staged.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        except _Skip as skip:
            skipped.append(Skipped(root.name, skip.reason))
            continue
        except TaskError:
            shutil.rmtree(target, ignore_errors=True)
            skipped.append(Skipped(root.name, "files_unsupported"))
            continue
        imported.append(Imported(target.name, exercise.slug, task_digest(target), tests))
    return ImportResult(language, commit, tuple(imported), tuple(skipped))


def index_toml(result: ImportResult) -> str:
    """The vendored set's index: source, licence, each task's digest, what was left out."""
    lines = [
        "# Written by `harness tasks import polyglot`; each digest is guest.task.task_digest",
        "# of the task directory (the pin table of every file in it).",
        f"source = {_toml_string(SOURCE_REPOSITORY)}",
        f"commit = {_toml_string(result.commit)}",
        f"language = {_toml_string(result.language)}",
        f"licence = {_toml_string(LICENCE)}",
        "",
    ]
    for task in result.imported:
        lines += [
            "[[imported]]",
            f"task = {_toml_string(task.task_id)}",
            f"exercise = {_toml_string(task.slug)}",
            f"digest = {_toml_string(task.digest)}",
            f"hidden_tests = {task.tests}",
            "",
        ]
    for skip in result.skipped:
        lines += [
            "[[left_out]]",
            f"exercise = {_toml_string(skip.slug)}",
            f"reason = {_toml_string(skip.reason)}",
            "",
        ]
    return "\n".join(lines)
