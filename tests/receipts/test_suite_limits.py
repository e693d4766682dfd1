"""The suite audit's bounds are the ones docs/suites.md states, at the boundary.

Why literals read from the docs and not the constants: a test that builds its fixture
from the constant moves with it and cannot see the constant change (the same reason as
tests/receipts/test_documented_limits.py). The file bound (4 GiB - 1) is too large to
build in a unit test, so its value is checked against the documentation and its
comparison and read length at a lowered bound; the others are checked at their real
value.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from receipts.audit import suite as suite_audit
from receipts.audit.suite import audit_suite_bytes, read_suite_file
from receipts.bundle import zip_bytes

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "suites.md").read_text(encoding="utf-8")
PARAGRAPH = " ".join(
    DOCS.split("Its bounds (tests/receipts/test_suite_limits.py", 1)[1].split("\n\n", 1)[0].split()
)


def _documented(pattern: str) -> int:
    match = re.search(pattern, PARAGRAPH)
    assert match is not None, pattern
    return int(match.group(1).replace(",", ""))


def _categories(data: bytes) -> list[str]:
    return [finding.category for finding in audit_suite_bytes(data).findings]


def test_the_file_bound_is_the_documented_zip32_limit() -> None:
    """Mutation control: MAX_SUITE_BYTES with any factor moved by one, or `- 1` as `- 2`
    or `+ 1`, fails this."""
    documented = _documented(r"suite receipt file larger than ([0-9,]+) bytes")
    assert documented == 0xFFFF_FFFF  # the largest offset a ZIP32 end record can hold
    assert documented == suite_audit.MAX_SUITE_BYTES


def test_a_file_at_the_bound_is_read_whole_and_one_byte_more_is_oversize(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """At a lowered bound (the real one is 4 GiB - 1): a file of exactly the bound is read
    whole and is no oversize (it is no ZIP either); one byte more, or far more, is
    `zip_oversize`. Mutation control: `len(data) > MAX_SUITE_BYTES` as `>=` fails the
    first case; `read(MAX_SUITE_BYTES + 1)` as `+ 0` or `- 1` fails the second."""
    bound = 1_000
    monkeypatch.setattr(suite_audit, "MAX_SUITE_BYTES", bound)
    path = tmp_path / "suite.zip"
    for size, expected in (
        (bound, ["zip_malformed"]),
        (bound + 1, ["zip_oversize"]),
        (bound * 5, ["zip_oversize"]),
    ):
        path.write_bytes(b"x" * size)
        data = read_suite_file(path)
        assert len(data) == min(size, bound + 1), size
        assert _categories(data) == expected, size


def test_a_suite_json_of_the_documented_ceiling_is_read_whole_and_one_byte_more_is_cut() -> None:
    """A `suite.json` of exactly 8 MiB is read whole (the container is the writer's; the
    record, all spaces, is not canonical); one byte more is cut, so the container no
    longer rebuilds (the writer refuses a larger one). Mutation control: the ceiling
    choice negated (suite.json given the member's 256 MiB) fails the second case, and
    so does the cut one byte past the ceiling (`[: ceiling + 1]`, the audit before this
    test: it read an 8 MiB + 1 suite.json whole and accepted the container);
    `[: ceiling - 1]` fails the first."""
    ceiling = _documented(r"`suite.json` entry larger than ([0-9,]+) bytes")
    assert ceiling == 8 * 1024 * 1024
    for size, expected in (
        (ceiling, ["suite_record_not_canonical"]),
        (ceiling + 1, ["container_not_canonical", "suite_record_not_canonical"]),
    ):
        assert _categories(zip_bytes({"suite.json": b" " * size})) == expected, size


def test_the_findings_stop_at_the_documented_count() -> None:
    """19,999 unknown entries and no suite.json are 20,000 findings, all listed; one more
    entry makes 20,001, and the first 20,000 are listed. Mutation control:
    `findings[:20_000]` as 19,999 fails the first case, as 20,001 the second (the model
    refuses 20,001); the model's `max_length=20_000` as 19,999 fails the first case (as
    20,001 it changes the published schema: tests/receipts/test_schema_docs.py)."""
    cap = _documented(r"lists at most ([0-9,]+) findings")
    assert cap == 20_000
    for unknown in (cap - 1, cap):
        entries = {f"extra/{index:05d}": b"" for index in range(unknown)}
        found = _categories(zip_bytes(entries))
        assert len(found) == cap, unknown
        assert found.count("unknown_entry") == min(unknown, cap), unknown
        assert (found[-1] == "suite_record_missing") is (unknown == cap - 1), unknown
