"""list and glob: sorted, bounded, symlinks shown but never followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from guest.tools import list_tool
from guest.tools.registry import ToolSet
from tests.guest.tools.support import call


def make_tree(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "b.py").write_text("b\n")
    (ws / "src" / "a.py").write_text("a\n")
    (ws / "README.md").write_text("r\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref\n")


def test_list_sorted_with_kind_suffixes(toolset: ToolSet, ws: Path, outside: Path) -> None:
    make_tree(ws)
    os.symlink(outside, ws / "zlink")
    os.mkfifo(ws / "zpipe")
    result = call(toolset, "list")
    assert result.outcome == "ok"
    assert result.output.splitlines() == [
        ".git/",
        "README.md",
        "src/",
        "src/a.py",
        "src/pkg/",
        "src/pkg/b.py",
        "zlink@",
        "zpipe=",
    ]


def test_list_subdirectory(toolset: ToolSet, ws: Path) -> None:
    make_tree(ws)
    result = call(toolset, "list", path="src/pkg")
    assert result.output.splitlines() == ["src/pkg/b.py"]


def test_list_symlinked_directory_refused(toolset: ToolSet, ws: Path, outside: Path) -> None:
    os.symlink(outside, ws / "link")
    assert call(toolset, "list", path="link").outcome == "symlink"


def test_list_bounded_and_counted(toolset: ToolSet, ws: Path) -> None:
    for i in range(list_tool.MAX_ENTRIES_SHOWN + 50):
        (ws / f"f{i:04d}").write_text("")
    result = call(toolset, "list")
    lines = result.output.splitlines()
    assert lines[: list_tool.MAX_ENTRIES_SHOWN] == [
        f"f{i:04d}" for i in range(list_tool.MAX_ENTRIES_SHOWN)
    ]
    assert "(50 more entries not shown" in result.output
    assert result.truncated
    assert result.bytes_before_truncation - result.bytes_out == 50 * len("f0000\n")


def test_glob_matches_at_any_depth_sorted(toolset: ToolSet, ws: Path) -> None:
    make_tree(ws)
    result = call(toolset, "glob", pattern="*.py")
    assert result.output.splitlines() == ["src/a.py", "src/pkg/b.py"]


def test_glob_anchored_and_relative_to_path(toolset: ToolSet, ws: Path) -> None:
    make_tree(ws)
    assert call(toolset, "glob", pattern="src/*.py").output.splitlines() == ["src/a.py"]
    assert call(toolset, "glob", pattern="pkg/*.py", path="src").output.splitlines() == [
        "src/pkg/b.py"
    ]


def test_glob_does_not_follow_symlinks(toolset: ToolSet, ws: Path, outside: Path) -> None:
    os.symlink(outside, ws / "link")
    result = call(toolset, "glob", pattern="**/*.txt")
    assert result.output == "No files found\n"


def test_glob_bounded_at_100(toolset: ToolSet, ws: Path) -> None:
    for i in range(130):
        (ws / f"m{i:03d}.py").write_text("")
    result = call(toolset, "glob", pattern="*.py")
    assert result.output.count(".py\n") == 100
    assert "Results are truncated" in result.output
    assert result.truncated
    assert result.bytes_before_truncation - result.bytes_out == 30 * len("m000.py\n")


def test_glob_invalid_patterns(toolset: ToolSet) -> None:
    assert call(toolset, "glob", pattern="/etc/*").outcome == "invalid_pattern"
    assert call(toolset, "glob", pattern="../*").outcome == "invalid_pattern"
    assert call(toolset, "glob", pattern="[abc").outcome == "invalid_pattern"
    assert call(toolset, "glob", pattern="*" * 600).outcome == "pattern_too_long"


@pytest.mark.parametrize("char", ["\x85", "\x9b", "\u2028", "\u2029", "\u202e", "\u2067"])
def test_listing_tools_skip_names_they_would_refuse(toolset: ToolSet, ws: Path, char: str) -> None:
    """A file whose name reorders or breaks the listing is neither shown nor matched;
    it is counted as skipped, and the tools still list the rest."""
    (ws / f"ok{char}evil.py").write_text("NEEDLE\n")
    (ws / "plain.py").write_text("NEEDLE\n")
    listed = call(toolset, "list")
    assert listed.outcome == "ok"
    assert char not in listed.output
    assert "plain.py" in listed.output
    assert "(1 entries with unusable names skipped)" in listed.output
    globbed = call(toolset, "glob", pattern="*.py")
    assert char not in globbed.output
    assert "plain.py" in globbed.output
    grepped = call(toolset, "grep", pattern="NEEDLE")
    assert char not in grepped.output
    assert "plain.py" in grepped.output
    assert call(toolset, "read", filePath=f"ok{char}evil.py").outcome in (
        "control_character",
        "line_separator",
        "bidi_control",
    )
