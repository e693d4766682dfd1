"""Independent verification: real hidden-test runs as `nobody`, without a network."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from guest.task import load_task, task_digest
from guest.verify.reports import ReportUnreadable, junit_counts, tap_counts
from guest.verify.run import traversable_by, verify
from tests.guest.support_tasks import TASKS, scratch, shipped, task_copy

__all__ = ["scratch"]


def _apply_solution(task_id: str, workspace: Path) -> None:
    if task_id == "py-one-line-fix":
        path = workspace / "stats.py"
        path.write_text(
            path.read_text().replace("len(values) - width)", "len(values) - width + 1)")
        )


def _verify(task_id: str, scratch: Path, workspace: Path | None = None) -> object:
    task, task_dir, copied = (
        task_copy(task_id, scratch)
        if workspace is None
        else (load_task(TASKS / task_id), shipped(TASKS / task_id, scratch), workspace)
    )
    return verify(task, task_dir, task_digest(task_dir), copied, scratch / "verify")


def test_untouched_workspace_fails_hidden_tests(scratch: Path) -> None:
    record = _verify("py-one-line-fix", scratch)
    assert (record.category, record.result) == ("ok", "failed")  # type: ignore[attr-defined]
    assert record.tests_failed > 0 and record.files_changed == 0  # type: ignore[attr-defined]
    assert record.net_isolation == "applied"  # type: ignore[attr-defined]


def test_changed_fixture_fails_even_when_hidden_tests_pass(scratch: Path) -> None:
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    _apply_solution("py-one-line-fix", workspace)
    (workspace / "tests" / "test_stats.py").write_text("def test_nothing():\n    pass\n")
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert record.tests_failed == 0 and record.tests_passed == 4
    assert record.fixture_changed
    assert record.result == "failed"


@pytest.mark.parametrize("cheat", ["conftest", "own_hidden_tests", "pytest_shadow"])
def test_planted_cheats_do_not_pass(scratch: Path, cheat: str) -> None:
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    if cheat == "conftest":
        (workspace / "conftest.py").write_text(
            "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
            "def pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
        )
    elif cheat == "own_hidden_tests":
        (workspace / "hidden_tests").mkdir()
        (workspace / "hidden_tests" / "test_hidden_stats.py").write_text(
            "def test_ok():\n    pass\n"
        )
    else:
        (workspace / "pytest.py").write_text("import sys\nsys.exit(0)\n")
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert record.result == "failed"
    assert record.tests_failed > 0


def test_symlinks_are_not_followed_into_the_copy(scratch: Path) -> None:
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    _apply_solution("py-one-line-fix", workspace)
    (workspace / "leak.txt").symlink_to("/etc/shadow")
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert record.result == "passed"
    assert not (scratch / "verify" / "workspace" / "leak.txt").exists()
    assert record.files_changed == 2  # stats.py and the link


def _synthetic_task(root: Path, hidden: str, report: str = "tap", deadline: int = 20) -> Path:
    task_dir = root / "synthetic"
    (task_dir / "workspace").mkdir(parents=True)
    (task_dir / "hidden_tests").mkdir()
    (task_dir / "workspace" / "f.txt").write_text("x")
    (task_dir / "task.toml").write_text(
        'id = "synthetic"\nlanguage = "python"\nprompt = "p"\nfixtures = []\n'
        '[tests]\ncommand = ["true"]\ndeadline_s = 5\n'
        f'[hidden]\ncommand = ["/bin/sh", "-c", {json.dumps(hidden)}, "sh", "{{report}}"]\n'
        f'report = "{report}"\njudge = "in_process"\nexpected = ["t"]\ndeadline_s = {deadline}\n'
    )
    task_dir.chmod(0o700)
    return task_dir


def _run_synthetic(scratch: Path, hidden: str, report: str = "tap", deadline: int = 20) -> object:
    task_dir = _synthetic_task(scratch, hidden, report, deadline)
    workspace = scratch / "final"
    shutil.copytree(task_dir / "workspace", workspace)
    return verify(load_task(task_dir), task_dir, task_digest(task_dir), workspace, scratch / "v")


TAP_PASS = 'printf "ok 1 - t\\n# tests 1\\n# pass 1\\n# fail 0\\n" > "$1"'


def test_hidden_tests_run_as_nobody(scratch: Path) -> None:
    record = _run_synthetic(scratch, f'test "$(id -u)" = 65534 || exit 9; {TAP_PASS}')
    assert record.result == "passed"  # type: ignore[attr-defined]


def test_hidden_tests_have_no_network(scratch: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
        probe = f'python3 -c "{connect}" && exit 9'
        record = _run_synthetic(scratch, f"{probe}; {TAP_PASS}")
    finally:
        listener.close()
    assert record.result == "passed"  # type: ignore[attr-defined]
    assert record.net_isolation == "applied"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("hidden", "category"),
    [
        ("exit 0", "report_missing"),
        ('printf "# tests 1\\n# pass 0\\n# fail 1\\n" > "$1"; exit 0', "report_inconsistent"),
        (f"{TAP_PASS}; exit 1", "report_inconsistent"),
        ("sleep 30", "timeout"),
    ],
)
def test_runner_outcomes_are_named(scratch: Path, hidden: str, category: str) -> None:
    record = _run_synthetic(scratch, hidden, deadline=2)
    assert record.category == category  # type: ignore[attr-defined]
    assert record.result == "failed"  # type: ignore[attr-defined]


def test_unreachable_scratch_is_refused(tmp_path: Path, scratch: Path) -> None:
    closed = scratch / "closed"
    closed.mkdir(mode=0o700)
    assert not traversable_by(closed / "x", (65534, 65534))
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    record = verify(task, task_dir, task_digest(task_dir), workspace, closed / "v")
    assert record.category == "workspace_unreadable"
    os.chmod(closed, 0o755)
    assert traversable_by(closed, (65534, 65534))


def test_a_runtime_root_the_judge_cannot_reach_is_a_runner_error(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The split judge and the solution's process import our modules from the runtime
    # root; one they cannot reach (seen: a runtime cache under pytest's 0700 tmp tree)
    # made the judge die at start and read as `report_missing`. It is the runner's failure.
    closed = scratch / "runtime"
    closed.mkdir(mode=0o700)
    monkeypatch.setattr("guest.verify.run.RUNTIME_ROOT", str(closed))
    task, task_dir, workspace = task_copy("py-one-line-fix", scratch)
    assert task.hidden.judge == "split"
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "v")
    assert (record.category, record.result, record.judge) == ("runner_error", "failed", "split")


def test_report_parsers() -> None:
    junit = (
        b'<testsuites><testsuite errors="0"><testcase/><testcase><failure/></testcase>'
        b"<testcase><error/></testcase><testcase><skipped/></testcase></testsuite></testsuites>"
    )
    counts = junit_counts(junit)
    assert (counts.passed, counts.failed, counts.errored, counts.skipped) == (1, 1, 1, 1)
    counts = tap_counts(b"TAP version 13\n# tests 3\n# pass 2\n# fail 1\n# cancelled 0\n")
    assert (counts.passed, counts.failed) == (2, 1)
    for bad in (b"# pass 1\n", b"# tests 2\n# pass 1\n# fail 0\n"):
        with pytest.raises(ReportUnreadable):
            tap_counts(bad)
    with pytest.raises(ReportUnreadable):
        junit_counts(b"<testsuites>")


def test_conftest_cheat_is_real_without_the_runner_options(scratch: Path) -> None:
    """Control for test_planted_cheats_do_not_pass[conftest]: with neither --noconftest
    nor the task's own ini file (each blocks the cheat alone), the cheat passes."""
    task_dir = scratch / "py-one-line-fix"
    shutil.copytree(TASKS / "py-one-line-fix", task_dir)
    toml = (task_dir / "task.toml").read_text()
    defended = '"--noconftest", "-c", "hidden_tests/pytest.ini", '
    toml = toml.replace(defended, '"-o", "pythonpath=.", "-c", "pytest.ini", ')
    # In process: split, the judge never collects the workspace's conftest.py at all.
    toml = toml.replace('report = "junit"\n', 'report = "junit"\njudge = "in_process"\n')
    (task_dir / "task.toml").write_text(toml)
    task_dir.chmod(0o700)
    task = load_task(task_dir)
    workspace = scratch / "final"
    shutil.copytree(task_dir / "workspace", workspace)
    (workspace / "conftest.py").write_text(
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert record.result == "passed"
