"""Independent verification: hidden tests on a fresh copy, after the agent and worker stopped."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.agent import NetIsolation
from receipts.records.base import Record
from receipts.types import Count, Millis, Sha256Hex

VerificationCategory = Literal[
    "ok",
    "timeout",
    "runner_error",
    "report_missing",
    "report_inconsistent",
    "workspace_unreadable",
    "net_isolation_unavailable",
]


class VerificationRecord(Record):
    schema_: Literal["harness.receipt.verification/1"] = Field(
        "harness.receipt.verification/1", alias="schema"
    )
    category: VerificationCategory
    result: Literal["passed", "failed"]
    task_sha256: Sha256Hex
    tests_passed: Count
    tests_failed: Count
    tests_errored: Count
    fixture_changed: bool
    """The agent modified a file the task declares as a fixture."""
    files_changed: Count
    final_diff_sha256: Sha256Hex
    net_isolation: NetIsolation
    """Whether the hidden tests ran without a network, as read back in their namespace."""
    duration_ms: Millis
