"""Read hidden-test counts from the runner's own report file (JUnit XML or TAP).

Counts come from the report, and are cross-checked against the runner's exit status
by the caller: a report that says "all passed" from a runner that exited non-zero (or
the reverse) is inconsistent, not a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from xml.etree import ElementTree

MAX_REPORT_BYTES = 4 * 1024 * 1024
_TAP_COUNT = re.compile(r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Counts:
    passed: int
    failed: int
    errored: int
    skipped: int


class ReportUnreadable(ValueError):
    """Missing, oversized or malformed report: the counts are unknown, not zero."""


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ReportUnreadable("missing") from exc
    if len(data) > MAX_REPORT_BYTES:
        raise ReportUnreadable("oversized")
    return data


def junit_counts(data: bytes) -> Counts:
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise ReportUnreadable("malformed") from exc
    cases = list(root.iter("testcase"))
    failed = errored = skipped = 0
    for case in cases:
        if case.find("error") is not None:
            errored += 1
        elif case.find("failure") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
    # Collection errors appear as a suite-level error count without a testcase.
    suite_errors = sum(int(suite.get("errors", "0")) for suite in root.iter("testsuite"))
    errored = max(errored, suite_errors)
    passed = len(cases) - failed - errored - skipped
    return Counts(passed=max(passed, 0), failed=failed, errored=errored, skipped=skipped)


def tap_counts(data: bytes) -> Counts:
    text = data.decode("utf-8", errors="replace")
    found = {key: int(value) for key, value in _TAP_COUNT.findall(text)}
    if "tests" not in found or "pass" not in found or "fail" not in found:
        raise ReportUnreadable("malformed")
    skipped = found.get("skipped", 0) + found.get("todo", 0)
    errored = found.get("cancelled", 0)
    if found["pass"] + found["fail"] + errored + skipped != found["tests"]:
        raise ReportUnreadable("malformed")
    return Counts(passed=found["pass"], failed=found["fail"], errored=errored, skipped=skipped)


def read_counts(path: Path, kind: Literal["junit", "tap"]) -> Counts:
    data = _read(path)
    return junit_counts(data) if kind == "junit" else tap_counts(data)
