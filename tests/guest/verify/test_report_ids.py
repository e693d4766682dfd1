"""The report is judged against the task's declared hidden test IDs, for both kinds.

The reward hack this closes: code of the agent's that runs before pytest collects (a
planted sitecustomize, a process that outlived its tool call) rewrites the hidden test
file to `def test_ok(): pass`. The runner exits 0 and its report says 1 passed, 0
failed: consistent with the exit status, about a test the task never had.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from guest.task import load_task, task_digest
from guest.verify.reports import ids_match, junit_ids, tap_ids
from guest.verify.run import verify
from tests.guest.support_tasks import TASK_IDS, TASKS, apply_solution, scratch, task_copy

__all__ = ["scratch"]

EXPECTED = ("a::one", "a::two", "a::three")


@pytest.mark.parametrize(
    ("ids", "matches"),
    [
        (EXPECTED, True),
        (("a::three", "a::one", "a::two"), True),  # the order is the runner's
        (("a::one", "a::two"), False),  # missing
        ((*EXPECTED, "a::four"), False),  # extra
        (("a::one", "a::two", "a::3"), False),  # renamed
        ((*EXPECTED, "a::one"), False),  # duplicated
        (("a::one", "a::one", "a::two"), False),  # duplicated in place of a missing one
        ((), False),
    ],
)
def test_only_exactly_the_expected_ids_match(ids: tuple[str, ...], matches: bool) -> None:
    assert ids_match(ids, EXPECTED) is matches


def test_junit_ids_are_classname_and_name() -> None:
    report = (
        b'<testsuites><testsuite><testcase classname="hidden_tests.t" name="test_a"/>'
        b'<testcase classname="hidden_tests.t" name="test_b[1]"><failure/></testcase>'
        b"</testsuite></testsuites>"
    )
    assert junit_ids(report) == ("hidden_tests.t::test_a", "hidden_tests.t::test_b[1]")


NODE_18_STYLE = b"""TAP version 13
# Subtest: /w/hidden_tests/x.test.js
    # Subtest: first
    ok 1 - first
      ---
      duration_ms: 1
      ...
    # Subtest: second
    not ok 2 - second
      ---
      error: |-
        ok 7 - not a test point, inside a YAML block
      ...
    1..2
ok 1 - /w/hidden_tests/x.test.js
  ---
  duration_ms: 3
  ...
1..1
# tests 2
# pass 1
# fail 1
"""

NODE_20_STYLE = b"""TAP version 13
# Subtest: first
ok 1 - first
  ---
  duration_ms: 1
  ...
# Subtest: second
not ok 2 - second # SKIP
  ---
  error: |-
    not ok 9 - also not a test point
  ...
1..2
# tests 2
"""


@pytest.mark.parametrize("report", [NODE_18_STYLE, NODE_20_STYLE])
def test_tap_ids_are_leaf_test_names_outside_yaml_blocks(report: bytes) -> None:
    """A file-level wrapper (node 18 nests a file's tests under it) is not a test, and a
    line inside a diagnostic block that looks like a test point is not one either."""
    assert tap_ids(report) == ("first", "second")


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_task_declares_unique_expected_ids(task_id: str) -> None:
    expected = load_task(TASKS / task_id).hidden.expected
    assert expected and len(set(expected)) == len(expected)


def _rewriting_task(root: Path, task_id: str) -> Path:
    """The task with a hidden command that first does what the agent's surviving code
    did: rewrite every hidden test file to one test that passes, in the verifier's copy,
    before the runner collects it."""
    task_dir = root / task_id
    shutil.copytree(TASKS / task_id, task_dir)
    toml = (task_dir / "task.toml").read_text()
    head, _, rest = toml.partition("[hidden]\ncommand = [")
    rewrite = (
        "for f in hidden_tests/*.py; do printf 'def test_ok():\\n    pass\\n' > $f; done; "
        "for f in hidden_tests/*.js; do "
        "printf \\\"require('node:test')('ok', () => {});\\\\n\\\" > $f; done; "
        'exec \\"$@\\"'
    )
    rest = rest.replace('judge = "in_process"\n', "")  # said once below (a shell command)
    (task_dir / "task.toml").write_text(
        f'{head}[hidden]\njudge = "in_process"\n'
        f'command = ["/bin/sh", "-c", "{rewrite}", "sh", {rest}'
    )
    task_dir.chmod(0o700)
    return task_dir


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_rewritten_hidden_tests_are_report_inconsistent(task_id: str, scratch: Path) -> None:
    """The honest solution, then the hidden tests replaced by one passing test while the
    verifier runs: the runner passes, its report is consistent with its exit status, and
    the verdict is still `report_inconsistent` because the IDs are not the task's.
    Mutation control: with the ID check removed from `_judge` (and from `passed`), each
    case is `ok`/`passed`."""
    task_dir = _rewriting_task(scratch / "tasks", task_id)
    task, _original, workspace = task_copy(task_id, scratch)
    apply_solution(task_id, workspace)
    record = verify(task.model_copy(update={"hidden": load_task(task_dir).hidden}), task_dir,
                    task_digest(task_dir), workspace, scratch / "verify")  # fmt: skip
    assert (record.category, record.result) == ("report_inconsistent", "failed")
    assert record.report_ids == "mismatch"
    assert (record.tests_passed, record.tests_failed, record.tests_errored) == (1, 0, 0)
    assert record.tests_expected == len(task.hidden.expected)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_honest_solutions_match_the_expected_ids(task_id: str, scratch: Path) -> None:
    task, task_dir, workspace = task_copy(task_id, scratch)
    apply_solution(task_id, workspace)
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert (record.category, record.result, record.report_ids) == ("ok", "passed", "match")
    assert record.tests_passed == record.tests_expected == len(task.hidden.expected)


def test_skipped_hidden_tests_are_no_pass(scratch: Path) -> None:
    """The code under test skips every test it cannot pass (pytest's Skipped raised from
    inside `moving_sum`): the report names exactly the expected IDs, nothing failed, two
    passed, and the exit status is 0. A pass needs every expected test passed.
    Mutation control: without `counts.passed == len(expected)` this is `passed`.
    In process only: split, the skip never reaches the judge (the next test)."""
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    task = task.model_copy(
        update={"hidden": task.hidden.model_copy(update={"judge": "in_process"})}
    )
    (workspace / "stats.py").write_text(SKIPPING)
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert (record.category, record.report_ids) == ("ok", "match")
    assert (record.tests_passed, record.tests_failed, record.tests_errored) == (2, 0, 0)
    assert record.result == "failed"


def test_a_skip_raised_by_the_solution_never_reaches_a_split_judge(scratch: Path) -> None:
    """Split, pytest's Skipped (a BaseException) raised in the solution's process ends that
    process: the judge's tests that need it fail, none is skipped."""
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    assert task.hidden.judge == "split"
    (workspace / "stats.py").write_text(SKIPPING)
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert (record.category, record.report_ids, record.judge) == ("ok", "match", "split")
    assert record.tests_failed + record.tests_errored == len(task.hidden.expected) - 1
    assert record.result == "failed"


SKIPPING = (
    "import pytest\n\n\n"
    "def moving_sum(values, width):\n"
    "    if width != 2:\n"
    "        pytest.skip('not today')\n"
    "    return [sum(values[i : i + width]) for i in range(len(values) - width + 1)]\n"
)
