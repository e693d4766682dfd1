"""grep: sorted matches, include globs, bounds, and a hard deadline on backtracking."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.tools import grep
from guest.tools.registry import ToolSet
from tests.guest.tools.support import PASS_COMMAND, call


def test_matches_sorted_by_path_then_line(toolset: ToolSet, ws: Path) -> None:
    (ws / "b.py").write_text("foo\nbar foo\n")
    (ws / "a.txt").write_text("no\nfood\n")
    result = call(toolset, "grep", pattern="foo")
    assert result.outcome == "ok"
    assert result.output.splitlines() == [
        "Found 3 matches",
        "a.txt:2: food",
        "b.py:1: foo",
        "b.py:2: bar foo",
    ]


def test_include_and_path(toolset: ToolSet, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "m.py").write_text("needle\n")
    (ws / "src" / "m.txt").write_text("needle\n")
    (ws / "top.py").write_text("needle\n")
    result = call(toolset, "grep", pattern="needle", include="*.py", path="src")
    assert result.output.splitlines() == ["Found 1 matches", "src/m.py:1: needle"]


def test_no_match(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    assert call(toolset, "grep", pattern="zzz").output == "No matches found\n"


def test_symlinked_and_hard_linked_files_not_searched(
    toolset: ToolSet, ws: Path, outside: Path
) -> None:
    os.symlink(outside, ws / "dirlink")
    os.symlink(outside / "secret.txt", ws / "filelink")
    os.link(outside / "secret.txt", ws / "hardlink")
    result = call(toolset, "grep", pattern="SECRET")
    assert result.output == "No matches found\n"


def test_binary_files_skipped(toolset: ToolSet, ws: Path) -> None:
    (ws / "b.bin").write_bytes(b"needle\x00")
    assert call(toolset, "grep", pattern="needle").output == "No matches found\n"


def test_invalid_and_overlong_patterns(toolset: ToolSet) -> None:
    assert call(toolset, "grep", pattern="(unclosed").outcome == "invalid_pattern"
    assert call(toolset, "grep", pattern="a" * 513).outcome == "pattern_too_long"
    assert call(toolset, "grep", pattern="a", include="{x").outcome == "invalid_pattern"


def test_match_count_bounded_and_counted(toolset: ToolSet, ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 150)
    result = call(toolset, "grep", pattern="hit")
    assert result.output.startswith("Found 150 matches\n")
    assert result.output.count("many.txt:") == grep.MAX_MATCHES
    assert result.truncated
    omitted_lines = sum(len(f"many.txt:{n}: hit\n") for n in range(101, 151))
    assert result.bytes_before_truncation - result.bytes_out == omitted_lines


def test_long_matching_line_cut(toolset: ToolSet, ws: Path) -> None:
    (ws / "w.txt").write_text("k" + "z" * 3000 + "\n")
    result = call(toolset, "grep", pattern="^k")
    assert "w.txt:1: k" + "z" * 1999 + "\n" in result.output
    assert result.bytes_before_truncation - result.bytes_out == 1001


@pytest.fixture
def fast_grep(ws: Path) -> Iterator[ToolSet]:
    with ToolSet(ws, PASS_COMMAND, [], "approve_all", grep_deadline_s=0.5) as ts:
        yield ts


def test_catastrophic_regex_stopped_at_deadline(fast_grep: ToolSet, ws: Path) -> None:
    (ws / "a.txt").write_text("early match\n")
    (ws / "b.txt").write_text("a" * 40 + "!\n")
    start = time.monotonic()
    result = call(fast_grep, "grep", pattern="(a|aa)+$|early")
    elapsed = time.monotonic() - start
    assert elapsed < 4  # killed at deadline + grace (1.5 s), before the CPU backstop (5 s)
    assert result.outcome == "ok"
    assert result.truncated
    assert "a.txt:1: early match" in result.output  # what arrived before the kill is kept
    assert "stopped at its time or size bound" in result.output


def test_cpu_rlimit_backstop_stops_the_child(
    fast_grep: ToolSet, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the parent's kill never came, the child's CPU rlimit would still end it."""
    monkeypatch.setattr(grep, "KILL_GRACE_S", 60.0)
    monkeypatch.setattr(grep, "CPU_MARGIN_S", 0)
    (ws / "b.txt").write_text("a" * 40 + "!\n")
    start = time.monotonic()
    result = call(fast_grep, "grep", pattern="(a|aa)+$")
    assert time.monotonic() - start < 10
    assert result.truncated
