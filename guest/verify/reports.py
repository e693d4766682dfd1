"""Read hidden-test counts and test IDs from the runner's own report file (JUnit XML or TAP).

Counts come from the report, and are cross-checked by the caller against the runner's
exit status (a report that says "all passed" from a runner that exited non-zero, or
the reverse, is inconsistent, not a pass) and against the task: the IDs of the tests
the report names must be exactly the hidden test IDs the task declares. A report about
other tests (a hidden test file rewritten to `def test_ok(): pass`, a test renamed,
dropped, added or reported twice) is inconsistent, never a pass.

Test IDs: for JUnit (pytest), `classname::name` of every `testcase`; for TAP (node's
test runner), the name of every leaf test point (one with no subtests before it, so a
file-level wrapper some node versions add is not a test), YAML diagnostic blocks skipped.
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


@dataclass(frozen=True)
class Report:
    counts: Counts
    ids: tuple[str, ...]
    """Every test the report names, in report order, duplicates kept."""


def ids_match(ids: tuple[str, ...], expected: tuple[str, ...]) -> bool:
    """Exactly the expected tests, each once: no test missing, extra, renamed or repeated."""
    return len(ids) == len(set(ids)) and sorted(ids) == sorted(expected)


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


def junit_ids(data: bytes) -> tuple[str, ...]:
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise ReportUnreadable("malformed") from exc
    return tuple(
        f"{case.get('classname', '')}::{case.get('name', '')}" for case in root.iter("testcase")
    )


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


_TAP_POINT = re.compile(r"^( *)(?:not )?ok \d+(?: - (.*?))?(?: # (?:SKIP|TODO)\b.*)?$")


def tap_ids(data: bytes) -> tuple[str, ...]:
    """Leaf test point names; a `---` ... `...` YAML block after a point is skipped."""
    names: list[str] = []
    previous_indent = -1
    block_end: str | None = None
    for line in data.decode("utf-8", errors="replace").splitlines():
        if block_end is not None:
            if line.rstrip() == block_end:
                block_end = None
            continue
        match = _TAP_POINT.match(line)
        if match is None:
            if line.strip() == "---":
                block_end = line.rstrip()[:-3] + "..."
            continue
        indent = len(match.group(1))
        if indent >= previous_indent:  # a point after a deeper one is its subtests' parent
            names.append(match.group(2) or "")
        previous_indent = indent
    return tuple(names)


def read_report(path: Path, kind: Literal["junit", "tap"]) -> Report:
    data = _read(path)
    if kind == "junit":
        return Report(junit_counts(data), junit_ids(data))
    return Report(tap_counts(data), tap_ids(data))
