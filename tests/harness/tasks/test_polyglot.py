"""The polyglot importer on small exercises laid out as the benchmark lays them out, and
the vendored Python tasks against their index (a task edited after import is caught).

The host check runs the real pytest on fresh copies: an example that fails its tests, or
a stub that passes them, must keep the exercise out, each with its own reason."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from guest.task import load_task, task_digest
from harness.tasks.polyglot import (
    RUNNER_PATCH,
    ImportRefused,
    import_polyglot,
    index_toml,
    source_commit,
)

REPO = Path(__file__).parents[3]
COMMIT = "7e0611e77b54e2dea774cdc0aa00cf9f7ed6144f"
STUB = "def add(a, b):\n    pass\n"
EXAMPLE = "def add(a, b):\n    return a + b\n"
TESTS = (
    "import unittest\n\nfrom adder import add\n\n\n"
    "class AdderTest(unittest.TestCase):\n"
    "    def test_small(self):\n        self.assertEqual(add(1, 2), 3)\n\n"
    "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
)


def exercise(
    root: Path,
    slug: str = "adder",
    stub: str = STUB,
    example: str = EXAMPLE,
    instructions: str = "# Instructions\n\nAdd two numbers.\n",
) -> Path:
    directory = root / "python" / "exercises" / "practice" / slug
    (directory / ".docs").mkdir(parents=True)
    (directory / ".meta").mkdir()
    (directory / ".docs" / "instructions.md").write_text(instructions)
    (directory / ".docs" / "instructions.append.md").write_text("# Append\n\nRaise errors.\n")
    (directory / ".meta" / "example.py").write_text(example)
    (directory / "adder.py").write_text(stub)
    (directory / "adder_test.py").write_text(TESTS)
    files = {"solution": ["adder.py"], "test": ["adder_test.py"], "example": [".meta/example.py"]}
    (directory / ".meta" / "config.json").write_text(json.dumps({"files": files}))
    return directory


def test_an_exercise_becomes_a_task_with_its_controls(tmp_path: Path) -> None:
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    exercise(source)
    result = import_polyglot(source, "python", tasks, COMMIT)
    assert [t.task_id for t in result.imported] == ["polyglot-py-adder"] and not result.skipped
    task_dir = tasks / "polyglot-py-adder"
    task = load_task(task_dir)
    assert task.hidden.expected == (
        "hidden_tests.adder_test.AdderTest::test_small",
        "hidden_tests.adder_test.AdderTest::test_zero",
    )
    assert task.fixtures == ("adder_test.py",)
    assert "Add two numbers." in task.prompt and "Raise errors." in task.prompt
    assert "`adder.py`" in task.prompt
    assert (task_dir / "workspace" / "adder.py").read_text() == STUB
    assert (task_dir / "hidden_tests" / "adder_test.py").read_text() == TESTS
    oracle = json.loads((task_dir / "scripts" / "oracle.json").read_text())
    assert oracle[0] == {"tool": "write", "arguments": {"filePath": "adder.py", "content": EXAMPLE}}
    assert oracle[-1]["tool"] == "finish"
    assert json.loads((task_dir / "scripts" / "null.json").read_text()) == [
        {"tool": "finish", "arguments": {}}
    ]
    patched = json.loads((task_dir / "scripts" / "runner_patch.json").read_text())
    assert patched == [
        {"tool": "write", "arguments": {"filePath": "adder.py", "content": RUNNER_PATCH + STUB}},
        {"tool": "finish", "arguments": {}},
    ]
    assert COMMIT in (task_dir / "ATTRIBUTION.md").read_text()
    assert result.imported[0].digest == task_digest(task_dir)
    index = tomllib.loads(index_toml(result))
    assert index["commit"] == COMMIT and index["imported"][0]["digest"] == task_digest(task_dir)
    assert not list(tasks.glob(".*")), "no staging directory is left behind"


def test_an_example_that_fails_its_tests_is_left_out(tmp_path: Path) -> None:
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    exercise(source, example="def add(a, b):\n    return a - b\n")
    result = import_polyglot(source, "python", tasks, COMMIT)
    assert not result.imported
    assert [(s.slug, s.reason) for s in result.skipped] == [("adder", "oracle_fails_on_host")]
    assert not list(tasks.iterdir())


def test_a_stub_that_passes_is_left_out(tmp_path: Path) -> None:
    """Otherwise the null control would be `accepted` and prove nothing."""
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    exercise(source, stub=EXAMPLE)
    result = import_polyglot(source, "python", tasks, COMMIT)
    assert [(s.slug, s.reason) for s in result.skipped] == [("adder", "null_passes_on_host")]


def test_a_stub_that_does_not_import_is_left_out(tmp_path: Path) -> None:
    """go-counting's stub lacks the constants its tests import: the null control's report
    names a collection error, which the verifier reads as an inconsistent report
    (failed_verification), never task_incomplete."""
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    exercise(source, stub="def other():\n    pass\n")
    result = import_polyglot(source, "python", tasks, COMMIT)
    assert [(s.slug, s.reason) for s in result.skipped] == [("adder", "null_report_inconsistent")]


def test_a_prompt_over_the_task_ceiling_is_left_out(tmp_path: Path) -> None:
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    exercise(source, instructions="x" * 20_000)
    result = import_polyglot(source, "python", tasks, COMMIT)
    assert [(s.slug, s.reason) for s in result.skipped] == [("adder", "prompt_too_long")]


def test_javascript_is_left_out_for_its_missing_runner(tmp_path: Path) -> None:
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    (source / "javascript" / "exercises" / "practice" / "bowling").mkdir(parents=True)
    result = import_polyglot(source, "javascript", tasks, COMMIT)
    assert [(s.slug, s.reason) for s in result.skipped] == [("bowling", "runner_unavailable")]


def test_an_existing_task_is_never_overwritten(tmp_path: Path) -> None:
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    (tasks / "polyglot-py-adder").mkdir(parents=True)
    (tasks / "polyglot-py-adder" / "task.toml").write_text("kept")
    exercise(source)
    with pytest.raises(ImportRefused):
        import_polyglot(source, "python", tasks, COMMIT)
    assert (tasks / "polyglot-py-adder" / "task.toml").read_text() == "kept"


def test_the_source_commit_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ImportRefused):
        source_commit(tmp_path, None)  # not a git checkout, and no --commit
    with pytest.raises(ImportRefused):
        source_commit(tmp_path, "HEAD")
    assert source_commit(tmp_path, COMMIT) == COMMIT


def test_the_vendored_python_tasks_match_their_index() -> None:
    """Each vendored task's digest is the one recorded at import: a task edited by hand
    (a test deleted, an expected ID dropped) no longer matches."""
    index = tomllib.loads((REPO / "profiles" / "polyglot" / "python.toml").read_text())
    assert index["commit"] == COMMIT
    assert len(index["imported"]) == 33
    assert index["left_out"] == [{"exercise": "go-counting", "reason": "null_report_inconsistent"}]
    on_disk = sorted(p.name for p in (REPO / "profiles" / "tasks").glob("polyglot-py-*"))
    assert on_disk == sorted(entry["task"] for entry in index["imported"])
    for entry in index["imported"]:
        task_dir = REPO / "profiles" / "tasks" / entry["task"]
        assert task_digest(task_dir) == entry["digest"], entry["task"]
        assert len(load_task(task_dir).hidden.expected) == entry["hidden_tests"]


def test_tests_that_lend_a_made_object_to_the_solution_are_judged_in_process(
    tmp_path: Path,
) -> None:
    """The split judge never lends a judge object to the solution by reference: an
    exercise whose tests `patch("<module>.name", new_callable=...)` (the solution would
    drive the object that class makes) is imported with hidden.judge = in_process; a patch
    with a callable the judge keeps, and every other exercise, keeps the split default.
    Mutation control: patches_solution returning False -> the `lent` case fails; returning
    True -> the `called` and `plain` cases fail."""
    source, tasks = tmp_path / "bench", tmp_path / "tasks"
    tasks.mkdir()
    for slug, patch in (
        ("lent", '@mock.patch("adder.print", create=True, new_callable=mock.MagicMock)'),
        ("called", '@mock.patch("adder.print", create=True, side_effect=print)'),
    ):
        patched = exercise(source, slug=slug)
        (patched / "adder_test.py").write_text(
            TESTS.replace("import unittest\n", "import unittest\nfrom unittest import mock\n")
            + f"\n    {patch}\n"
            "    def test_quiet(self, _print):\n        self.assertEqual(add(1, 1), 2)\n"
        )
    exercise(source, slug="plain")
    result = import_polyglot(source, "python", tasks, COMMIT)
    assert sorted(t.task_id for t in result.imported) == [
        "polyglot-py-called",
        "polyglot-py-lent",
        "polyglot-py-plain",
    ]
    assert load_task(tasks / "polyglot-py-lent").hidden.judge == "in_process"
    assert load_task(tasks / "polyglot-py-called").hidden.judge == "split"
    assert load_task(tasks / "polyglot-py-plain").hidden.judge == "split"
    assert "judge" not in (tasks / "polyglot-py-plain" / "task.toml").read_text()
