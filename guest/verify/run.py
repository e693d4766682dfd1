"""Run a task's hidden tests against the agent's final workspace, independently.

After the agent and the worker have stopped: copy the final workspace (regular files
only) into a fresh directory, put the task's hidden tests beside it (replacing any
`hidden_tests/` the agent made), run the hidden command as an unprivileged user in
its own process group, with rlimits, a deadline and no network, and read the counts
from the runner's report. The agent's own `run_tests` results play no part.

The report is judged twice: against the runner's exit status, and against the task's
declared hidden test IDs (exactly that set, each once), so a report about other tests
is `report_inconsistent`. The record carries the digest of the workspace copy that was
verified (receipts.treedigest, taken right after the copy, before the hidden tests are
put beside it) and closed flags for changes that reach into test infrastructure.

Limits of what this proves: the agent's code runs inside the test process, so code
written to cheat (exit early with success, rewrite the report) can; the cross-checks
of the report, the fixed runner options (-I, --noconftest, the task's own ini file)
and `fixture_changed` catch the common forms, not every form.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from guest.task import REPORT_PLACEHOLDER, SPLIT_PREFIX, Task
from guest.tools.confine import RunAs, RunLimits, RunReport, run_confined
from guest.verify.reports import Counts, Report, ReportUnreadable, ids_match, read_report
from guest.verify.snapshot import copy_regular_tree, describe_change, plugin_modules
from guest.verify.split import JUDGE, RUNTIME_ROOT, run_split
from receipts.records import VerificationRecord
from receipts.records.verification import JudgeProcess, ReportIds, VerificationCategory
from receipts.treedigest import tree_sha256

NOBODY: RunAs = (65534, 65534)
HIDDEN_DIR = "hidden_tests"
STUBS_DIR = "stub"
"""In the judge's directory: the task's original workspace, read by the judge only."""


def _chown_tree(root: Path, run_as: RunAs) -> None:
    uid, gid = run_as
    for directory, dirnames, filenames in os.walk(root):
        os.chown(directory, uid, gid)
        for name in dirnames + filenames:
            os.lchown(os.path.join(directory, name), uid, gid)


def runtime_reachable(users: tuple[RunAs, ...]) -> bool:
    """Whether every user of a split judgement can reach the runtime root both of its
    processes import our modules from (guest/verify/split.py). On the guest it is a
    read-only mount everyone can search; a root only root can reach would leave the judge
    unable to start, which must read as the runner's failure, not a missing report."""
    return all(traversable_by(Path(RUNTIME_ROOT), who) for who in users)


def traversable_by(path: Path, run_as: RunAs) -> bool:
    """Whether `run_as` can reach `path`: every ancestor searchable by it (root's
    os.access would say yes to everything, so the mode bits are read instead)."""
    uid, gid = run_as
    for ancestor in [path, *path.parents]:
        if not ancestor.exists():
            continue  # to be created by us, with a mode we choose
        info = ancestor.stat()
        if info.st_uid == uid:
            bit = 0o100
        elif info.st_gid == gid:
            bit = 0o010
        else:
            bit = 0o001
        if not info.st_mode & bit:
            return False
    return True


@dataclass(frozen=True)
class _Prepared:
    fresh: Path
    """The workspace copy (the agent's process, or the in-process command, runs here)."""
    judge_dir: Path | None
    """Split only: the judge's own directory (0700, the judge's): the hidden tests and the
    stub, neither readable nor listable by `nobody`."""
    ipc: Path | None
    report: Path
    digest: str


def hidden_tests_exposed(task_dir: Path, run_as: RunAs) -> bool:
    """Whether the solution's user could reach the task as shipped to the verifier (its
    hidden tests, its reference solution): the verification guest's copy is the root's
    alone (harness/trial: guest.task.copy_task_private), and a split judgement refuses to
    run beside a task the solution could read."""
    return traversable_by(task_dir, run_as)


def _prepare(
    task: Task, task_dir: Path, final_workspace: Path, scratch: Path, *, run_as: RunAs,
    judge_as: RunAs,
) -> _Prepared:  # fmt: skip
    """The fresh copy; the hidden tests beside it (in process) or in the judge's own
    directory with the stub (split); the report path (outside the copy, in a directory
    that is never the solution's); the tree digest of the copy as received (before the
    hidden tests are put in)."""
    scratch.mkdir(mode=0o755, parents=True, exist_ok=False)
    if not traversable_by(scratch, run_as):
        raise PermissionError("scratch is not reachable by the unprivileged user")
    fresh = scratch / "workspace"
    copy_regular_tree(final_workspace, fresh)
    digest = tree_sha256(fresh)
    shutil.rmtree(fresh / HIDDEN_DIR, ignore_errors=True)
    if (fresh / HIDDEN_DIR).exists() or (fresh / HIDDEN_DIR).is_symlink():
        (fresh / HIDDEN_DIR).unlink()
    split = task.hidden.judge == "split"
    if split and not traversable_by(scratch, judge_as):
        raise PermissionError("scratch is not reachable by the judge's user")
    judge_dir = scratch / "judge" if split else None
    reports = scratch / "report"
    reports.mkdir(mode=0o700 if split else 0o755)
    report = reports / "report"
    if judge_dir is not None:
        judge_dir.mkdir(mode=0o700)
        copy_regular_tree(task_dir / HIDDEN_DIR, judge_dir / HIDDEN_DIR)
        copy_regular_tree(task_dir / "workspace", judge_dir / STUBS_DIR)
        _chown_tree(judge_dir, judge_as)
        _chown_tree(reports, judge_as)
    else:
        copy_regular_tree(task_dir / HIDDEN_DIR, fresh / HIDDEN_DIR)
        report.touch(mode=0o600)  # the runner writes it; the directory stays root's
        os.chown(report, *run_as)
    _chown_tree(fresh, run_as)
    ipc = None
    if split:
        ipc = scratch / "ipc"
        ipc.mkdir(mode=0o711)  # the judge's: `nobody` may reach the socket, not list or add
        _chown_tree(ipc, judge_as)
        os.chmod(ipc, 0o711)
    return _Prepared(fresh, judge_dir, ipc, report, digest)


def _judge(
    returncode: int | None, report: Report, expected: tuple[str, ...]
) -> VerificationCategory:
    counts = report.counts
    all_passed = counts.failed == 0 and counts.errored == 0 and counts.passed > 0
    if (returncode == 0) != all_passed:
        return "report_inconsistent"
    if not ids_match(report.ids, expected):
        return "report_inconsistent"  # a report about other tests than the task's
    return "ok"


def verify(
    task: Task,
    task_dir: Path,
    task_sha256: str,
    final_workspace: Path,
    scratch: Path,
    *,
    run_as: RunAs = NOBODY,
    judge_as: RunAs = JUDGE,
) -> VerificationRecord:
    started = time.monotonic()
    plugins = plugin_modules(task.tests.command, task.hidden.command)
    change = describe_change(task_dir / "workspace", final_workspace, task.fixtures, plugins)
    counts = Counts(passed=0, failed=0, errored=0, skipped=0)
    report_ids: ReportIds = "unread"
    workspace_sha256: str | None = None
    exposed = task.hidden.judge == "split" and hidden_tests_exposed(task_dir, run_as)
    try:
        if exposed:
            raise PermissionError("the solution's user can read the task")
        prepared = _prepare(
            task, task_dir, final_workspace, scratch, run_as=run_as, judge_as=judge_as
        )
    except (OSError, ValueError):  # ValueError: a path treedigest cannot name
        category: VerificationCategory = (
            "hidden_tests_exposed" if exposed else "workspace_unreadable"
        )
        isolation = "not_applied"
        workspace_sha256 = None
        judge: JudgeProcess = "not_run"
    else:
        workspace_sha256 = prepared.digest
        judge = task.hidden.judge
        report = prepared.report
        argv = [arg.replace(REPORT_PLACEHOLDER, str(report)) for arg in task.hidden.command]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(prepared.fresh),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        limits = RunLimits(
            wall_seconds=float(task.hidden.deadline_s), cpu_seconds=task.hidden.deadline_s
        )
        run: RunReport | None = None
        if prepared.judge_dir is not None and not runtime_reachable((run_as, judge_as)):
            pass  # the judge and the solution import our modules from there: they cannot start
        elif prepared.judge_dir is not None and prepared.ipc is not None:
            run = run_split(
                argv[len(SPLIT_PREFIX) :],
                judge_dir=prepared.judge_dir,
                workspace=prepared.fresh,
                ipc_dir=prepared.ipc,
                stubs=prepared.judge_dir / STUBS_DIR,
                limits=limits,
                env=env,
                server_as=run_as,
                judge_as=judge_as,
            ).judge
        else:
            run = run_confined(
                argv,
                cwd=str(prepared.fresh),
                env=env,
                limits=limits,
                net_policy="required",
                mechanism="unshare_syscall",
                run_as=run_as,
            )
        if run is None:
            category, isolation = "runner_error", "not_applied"
        else:
            isolation = run.net_isolation
            if run.exit is None:
                category = "net_isolation_unavailable" if isolation != "applied" else "runner_error"
            elif run.exit == "deadline":
                category = "timeout"
            else:
                try:
                    read = read_report(report, task.hidden.report)
                except ReportUnreadable:
                    category = "report_missing"
                else:
                    counts = read.counts
                    matched = ids_match(read.ids, task.hidden.expected)
                    report_ids = "match" if matched else "mismatch"
                    category = _judge(run.returncode, read, task.hidden.expected)
    passed = (
        category == "ok"
        and report_ids == "match"
        and counts.passed == len(task.hidden.expected)  # every expected test ran and passed
        and counts.failed == 0
        and counts.errored == 0
        and counts.passed > 0
        and not change.fixture_changed
    )
    return VerificationRecord(
        category=category,
        result="passed" if passed else "failed",
        task_sha256=task_sha256,
        tests_expected=len(task.hidden.expected),
        report_ids=report_ids,
        tests_passed=counts.passed,
        tests_failed=counts.failed,
        tests_errored=counts.errored,
        fixture_changed=change.fixture_changed,
        files_changed=change.files_changed,
        final_diff_sha256=change.diff_sha256,
        workspace_sha256=workspace_sha256,
        suspicious_changes=change.suspicious,
        net_isolation=isolation,
        judge=judge,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
