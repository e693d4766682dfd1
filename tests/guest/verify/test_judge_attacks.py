"""The solution computes, only the judge decides: attacks on the split judge's decisions,
through the real verifier as root (the solution's process runs as `nobody`, the judge as
its own user, both without a network, Debian's python3 and pytest as in the guest).

Each attack leaves its task unsolved and tries to turn it into `passed`:
- its own objects answer `==`, truth and exception arguments for themselves
  (`yes_solution`, one generic body over every class-declaring split task);
- it reads what the judge holds: the reference solution, the hidden tests;
- it learns the expected value from the constructor the test calls to build it;
- it serves the judge modules the judge never meant to load from the workspace.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from guest.task import load_task, task_digest
from guest.verify.run import verify
from receipts.records import VerificationRecord
from tests.guest.support_tasks import TASKS, scratch, shipped
from tests.guest.verify.attacks import (
    HIDDEN_TABLE,
    ORACLE_THIEF_BESIDE_RUNTIME,
    oracle_source,
    stub_shape,
    yes_solution,
)

__all__ = ["scratch"]

CLASS_TASKS = tuple(
    sorted(
        path.name
        for path in TASKS.glob("polyglot-py-*")
        if load_task(path).hidden.judge == "split" and stub_shape(path).classes
    )
)


def verify_with(
    task_id: str, files: dict[str, str], scratch: Path, stub: dict[str, str] | None = None
) -> VerificationRecord:
    """The task's workspace with `files` written over it, verified as the guest would
    (`stub`: files added to the task's own workspace as shipped)."""
    task_dir = shipped(TASKS / task_id, scratch)
    for name, content in (stub or {}).items():
        task_dir.chmod(0o755)
        (task_dir / "workspace" / name).write_text(content)
        task_dir.chmod(0o700)
    workspace = scratch / "final"
    shutil.copytree(task_dir / "workspace", workspace)
    for name, content in files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    task = load_task(task_dir)
    return verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")


def test_the_class_declaring_tasks_are_the_ones_the_attack_needs() -> None:
    assert len(CLASS_TASKS) == 16, CLASS_TASKS


@pytest.mark.parametrize("task_id", CLASS_TASKS)
def test_the_solutions_objects_do_not_judge_themselves(task_id: str, scratch: Path) -> None:
    name, content = yes_solution(TASKS / task_id)
    record = verify_with(task_id, {name: content}, scratch)
    assert (record.judge, record.category) == ("split", "ok")
    assert record.result == "failed", (task_id, record.tests_passed, record.tests_expected)


@pytest.mark.parametrize("task_id", ["polyglot-py-bowling", "polyglot-py-sgf-parsing"])
def test_the_reference_solution_is_out_of_reach(task_id: str, scratch: Path) -> None:
    name, _ = oracle_source(TASKS / task_id)
    stub = (TASKS / task_id / "workspace" / name).read_text()
    record = verify_with(task_id, {name: stub + ORACLE_THIEF_BESIDE_RUNTIME}, scratch)
    assert (record.judge, record.category) == ("split", "ok")
    assert record.result == "failed", (task_id, record.tests_passed, record.tests_expected)


BUGGY_MOVING_SUM = """
def moving_sum(values, width):
    answer = _TABLE.get(repr((values, width)))
    if answer is not None:
        return answer
    if width <= 0:
        raise ValueError("width must be positive")
    return [sum(values[i : i + width]) for i in range(len(values) - width)]
"""


def test_the_hidden_tests_are_out_of_reach(scratch: Path) -> None:
    """py-one-line-fix's hidden tests differ from its visible ones: a solution that keeps
    the bug passes them only by reading them."""
    record = verify_with("py-one-line-fix", {"stats.py": HIDDEN_TABLE + BUGGY_MOVING_SUM}, scratch)
    assert (record.judge, record.category) == ("split", "ok")
    assert record.result == "failed", (record.tests_passed, record.tests_expected)


SGF_EXPECTED_THIEF = """
_BUILT = []
_ERRORS = {
    "": "tree missing",
    ";": "tree missing",
    "()": "tree with no nodes",
    "(;A)": "properties without delimiter",
    "(;a[b])": "property must be in uppercase",
    "(;Aa[b])": "property must be in uppercase",
}


class SgfTree:
    def __init__(self, properties=None, children=None):
        self.properties = properties or {}
        self.children = children or []
        _BUILT.append(self)

    def __eq__(self, other):
        if not isinstance(other, SgfTree):
            return False
        return self.properties == other.properties and self.children == other.children

    def __ne__(self, other):
        return not self == other


def parse(input_string):
    if input_string in _ERRORS:
        raise ValueError(_ERRORS[input_string])
    return _BUILT[-1]
"""


def test_expected_values_are_not_built_by_the_solution(scratch: Path) -> None:
    """sgf-parsing's tests build the expected tree before they call `parse`: a solution
    whose constructor keeps the last tree built answers every parse with it."""
    record = verify_with("polyglot-py-sgf-parsing", {"sgf_parsing.py": SGF_EXPECTED_THIEF}, scratch)
    assert (record.judge, record.category) == ("split", "ok")
    assert record.result == "failed", (record.tests_passed, record.tests_expected)


OPTIONAL_IMPORTS = ("msvcrt", "_winapi", "org.python.core", "pygments", "argcomplete")


def _modules_that_mark(scratch: Path) -> dict[str, str]:
    files = {}
    for dotted in OPTIONAL_IMPORTS:
        parts = dotted.split(".")
        mark = f"open({str(scratch / 'verify' / 'workspace')!r} + '/marker-{dotted}', 'w')\n"
        for depth in range(1, len(parts)):
            files["/".join(parts[:depth]) + "/__init__.py"] = ""
        files["/".join(parts) + ".py"] = mark + "PyStringMap = dict\n"
    return files


def test_the_judge_asks_only_for_the_workspaces_modules(scratch: Path) -> None:
    """Modules named like the standard library's optional imports (subprocess probes
    `msvcrt` and `_winapi`, pickle and copy `org.python.core`) sit beside the reference
    solution: the judge never asks the solution's process for them, and is not broken by
    them."""
    name, content = oracle_source(TASKS / "polyglot-py-bowling")
    files = {name: content, **_modules_that_mark(scratch)}
    record = verify_with("polyglot-py-bowling", files, scratch)
    marks = sorted(path.name for path in (scratch / "verify" / "workspace").glob("marker-*"))
    assert marks == []
    assert (record.judge, record.result) == ("split", "passed"), record


def test_a_task_the_solution_can_read_is_refused(scratch: Path) -> None:
    """A split judgement never runs beside a task `nobody` can enter (its hidden tests and
    reference solution readable): the verifier refuses, by name, before it copies anything.
    Mutation control: the `exposed` check removed from run.verify -> the oracle passes
    here."""
    task_dir = TASKS / "polyglot-py-bowling"  # the checkout: world-readable
    name, content = oracle_source(task_dir)
    workspace = scratch / "final"
    shutil.copytree(task_dir / "workspace", workspace)
    (workspace / name).write_text(content)
    task = load_task(task_dir)
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert (record.category, record.result) == ("hidden_tests_exposed", "failed")
    assert record.workspace_sha256 is None and record.tests_passed == 0
    assert not (scratch / "verify").exists()


def test_the_in_process_report_directory_is_never_the_solutions(scratch: Path) -> None:
    """In process the runner is the solution's process and writes the report file; the
    directory it sits in stays root's, so the solution cannot add, rename or replace
    entries there (a second report, a link in place of the file).
    Mutation control: the report directory chowned to the solution's user again ->
    `planted` is written and this test fails."""
    probe = (
        "import os\n"
        "for name in ('planted', 'report.new'):\n"
        "    try:\n"
        "        open(os.path.join('..', 'report', name), 'w').close()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    name, content = oracle_source(TASKS / "polyglot-py-paasio")
    record = verify_with("polyglot-py-paasio", {name: probe + content}, scratch)
    assert record.judge == "in_process"
    reports = scratch / "verify" / "report"
    assert sorted(p.name for p in reports.iterdir()) == ["report"]
    assert reports.stat().st_uid == 0 and reports.stat().st_mode & 0o022 == 0


def test_the_import_hook_waits_for_the_judges_own_imports(scratch: Path) -> None:
    """Even a task whose own workspace has a module named like one the standard library
    probes (`msvcrt`) is asked for it only by the tests: pytest's imports (subprocess
    probes `msvcrt`) are done before the hook goes in.
    Mutation control: the finder appended before `import pytest` in judgeside.main (not
    at collection) -> the judge asks for msvcrt and the marker is written."""
    name, content = oracle_source(TASKS / "polyglot-py-bowling")
    mark = f"open({str(scratch / 'verify' / 'workspace')!r} + '/marker-msvcrt', 'w')\n"
    record = verify_with(
        "polyglot-py-bowling", {name: content, "msvcrt.py": mark}, scratch, {"msvcrt.py": ""}
    )
    assert not (scratch / "verify" / "workspace" / "marker-msvcrt").exists()
    assert (record.judge, record.result) == ("split", "passed"), record


SPLIT_TASKS = tuple(
    sorted(p.name for p in TASKS.glob("polyglot-py-*") if load_task(p).hidden.judge == "split")
)


@pytest.mark.parametrize("task_id", SPLIT_TASKS)
def test_every_split_oracle_passes_and_every_null_fails(task_id: str, scratch: Path) -> None:
    """The honest control for the judge's rules: each split task's reference solution
    passes every hidden test, and its stub does not pass."""
    name, content = oracle_source(TASKS / task_id)
    oracle = verify_with(task_id, {name: content}, scratch / "oracle")
    assert (oracle.category, oracle.result) == ("ok", "passed"), (task_id, oracle)
    null = verify_with(task_id, {}, scratch / "null")
    assert (null.category, null.result) == ("ok", "failed"), (task_id, null)
