"""Independent verification: hidden tests on a fresh copy, after the agent and worker stopped."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from receipts.records.agent import NetIsolation
from receipts.records.base import Record
from receipts.records.hostreading import HOST_READINGS, HostReading, VerifierHostReading
from receipts.types import Count, Millis, Sha256Hex

VerificationCategoryV3 = Literal[
    "ok",
    "timeout",
    "runner_error",
    "report_missing",
    "report_inconsistent",
    "workspace_unreadable",
    "net_isolation_unavailable",
    "workspace_mismatch",
    HostReading,
    VerifierHostReading,
]
"""How verification ended, in `verification/1` to `/3` (receipts/records/legacy.py)."""

VerificationCategory = Literal[VerificationCategoryV3, "hidden_tests_exposed"]
"""How verification ended. The host readings (receipts/records/hostreading.py) are the
host's, not the guest's: the verifier's record file was not strict JSON of this schema
(`records_invalid`), or its command ended without writing one it could trust
(`gate_refused`, `killed_by_signal`, `deadline_exceeded`, `exited_nonzero`); nothing of
it was kept; or the host never got as far as running it (`workspace_not_carried`,
`verifier_vm_failed`). `workspace_mismatch` is the host's judgement of a record it read:
the workspace the verifier says it verified (`workspace_sha256`) is not the one the host
carried to it. `timeout` is the guest's own reading: the hidden tests ran past their
deadline and the verifier said so in its record. `hidden_tests_exposed` is the guest's
refusal to judge: the solution's user could have entered the task's directory (its
hidden tests, its reference solution), so nothing ran."""


VERIFICATION_HOST_READINGS: frozenset[str] = HOST_READINGS | frozenset(
    get_args(VerifierHostReading)
)
"""Categories only the host may write into a verification record (its stand-in)."""


SuspiciousChange = Literal[
    "conftest",
    "pytest_plugin",
    "pth_file",
    "sitecustomize",
    "usercustomize",
    "hidden_tests_dir",
    "new_top_level_entry",
    "special_file",
]
"""What the final workspace adds or changes, compared to the task's original workspace,
that can reach into a test run rather than into the code under test (a reviewer's flag,
not a verdict): a `conftest.py` anywhere; a file named like a pytest plugin
(`pytest_*.py`) or named by a `-p` option of the task's commands; a `*.pth` file; a
`sitecustomize`/`usercustomize` module; a `hidden_tests/` the agent made; a top-level
entry the original workspace does not have; an entry that is not a regular file or
directory (a link, FIFO or device)."""

ReportIds = Literal["match", "mismatch", "unread"]
"""Whether the test IDs in the runner's report are exactly the task's expected hidden
test IDs (as a set, each once): `unread` when no report was read."""


class VerificationFields(Record):
    """The fields of verification/2 to /4 (each version adds its schema id; /3 and /4
    the judge; /4 a category)."""

    category: VerificationCategory
    """Each older version narrows it to the categories it had."""
    result: Literal["passed", "failed"]
    task_sha256: Sha256Hex | None
    """The task the guest verified; None exactly when its record was not read (a host
    reading)."""
    tests_expected: Count
    """How many hidden test IDs the task declares: the report must name exactly these, and
    a pass needs every one of them passed (a skipped test is no pass)."""
    report_ids: ReportIds
    tests_passed: Count
    tests_failed: Count
    tests_errored: Count
    fixture_changed: bool
    """The agent modified a file the task declares as a fixture."""
    files_changed: Count
    final_diff_sha256: Sha256Hex | None
    """None exactly when the record was not read (a host reading)."""
    workspace_sha256: Sha256Hex | None
    """receipts.treedigest.tree_sha256 of the workspace copy the hidden tests ran on,
    before the task's hidden tests were put beside it; None when the record was not read
    or the workspace could not be copied (`workspace_unreadable`)."""
    suspicious_changes: tuple[SuspiciousChange, ...]
    """Sorted, each once: see SuspiciousChange."""
    net_isolation: NetIsolation
    """Whether the hidden tests ran without a network, as read back in their namespace."""
    duration_ms: Millis

    @model_validator(mode="after")
    def _unread_only_when_invalid(self) -> VerificationFields:
        """A digest is absent only in the host's stand-in for a record it could not read
        (any host reading), and that stand-in never passes: otherwise a record without a
        task digest could be accepted. A pass needs the report's IDs to match."""
        unread = self.category in VERIFICATION_HOST_READINGS
        digests_absent = (self.task_sha256 is None, self.final_diff_sha256 is None)
        if digests_absent != (unread, unread) or (unread and self.result != "failed"):
            raise ValueError("digests are absent exactly when the record was not read")
        no_copy = unread or self.category in ("workspace_unreadable", "hidden_tests_exposed")
        if (self.workspace_sha256 is None) != no_copy:
            raise ValueError("the workspace digest is absent exactly when nothing was copied")
        if self.suspicious_changes != tuple(sorted(set(self.suspicious_changes))):
            raise ValueError("suspicious_changes is sorted and unique")
        every_test_passed = self.report_ids == "match" and self.tests_passed == self.tests_expected
        if self.result == "passed" and not every_test_passed:
            raise ValueError("a pass needs exactly the expected tests, every one passed")
        return self


JudgeProcess = Literal["split", "in_process", "not_run"]
"""Where the hidden tests' assertions ran. `split`: in a process that never imported the
agent's code, the solution served from a second process as another user
(guest/verify/split.py). `in_process`: the task's command as given, with the agent's
code inside the test process (the task declares it cannot be split). `not_run`: the
hidden command never ran (the workspace could not be copied, or the record is the
host's stand-in)."""


NO_RUN: frozenset[str] = VERIFICATION_HOST_READINGS | {
    "workspace_unreadable",
    "hidden_tests_exposed",
}
"""Categories in which the hidden command never ran (the judge is `not_run`)."""


class JudgedFields(VerificationFields):
    """The fields of verification/3 and /4: which judge ran."""

    judge: JudgeProcess

    @model_validator(mode="after")
    def _judge_ran(self) -> JudgedFields:
        """A stand-in or an uncopied workspace ran no judge; anything else says which."""
        if (self.judge == "not_run") != (self.category in NO_RUN):
            raise ValueError("judge is not_run exactly when the hidden command never ran")
        return self


class VerificationRecord(JudgedFields):
    """`verification/4`: a refusal to judge a task the solution could read
    (`hidden_tests_exposed`); a pass judged in process makes the trial's verdict
    `accepted_unguarded` (receipts/verdict.py)."""

    schema_: Literal["harness.receipt.verification/4"] = Field(
        "harness.receipt.verification/4", alias="schema"
    )
