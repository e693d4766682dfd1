"""edit: exact and unique, or refused with the file untouched."""

from __future__ import annotations

import os
from pathlib import Path

from guest.tools.registry import ToolSet
from guest.tools.result import ToolResult
from tests.guest.tools.conftest import SECRET
from tests.guest.tools.support import call


def read_then_edit(toolset: ToolSet, **args: object) -> ToolResult:
    """An edit as an agent makes one: its file read first (guest/tools/seen.py)."""
    call(toolset, "read", filePath=args["filePath"])
    return call(toolset, "edit", **args)


def test_unique_exact_match_replaced(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\ny = 2\n")
    result = read_then_edit(toolset, filePath="a.py", oldString="y = 2", newString="y = 3")
    assert result.outcome == "ok"
    assert (ws / "a.py").read_text() == "x = 1\ny = 3\n"
    assert result.details is not None
    assert result.model_dump()["details"] == {"kind": "edit", "match": "exact", "replacements": 1}


def test_multiple_matches_refused_and_file_untouched(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("v = 1\nv = 1\n")
    result = read_then_edit(toolset, filePath="a.py", oldString="v = 1", newString="v = 2")
    assert result.outcome == "multiple_matches"
    assert (ws / "a.py").read_text() == "v = 1\nv = 1\n"


def test_replace_all_replaces_every_match(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("v = 1\nv = 1\n")
    result = read_then_edit(
        toolset, filePath="a.py", oldString="v = 1", newString="v = 2", replaceAll=True
    )
    assert result.outcome == "ok"
    assert (ws / "a.py").read_text() == "v = 2\nv = 2\n"
    assert result.model_dump()["details"]["replacements"] == 2


def test_not_found_refused(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\n")
    result = read_then_edit(toolset, filePath="a.py", oldString="x  = 1", newString="x = 2")
    assert result.outcome == "old_string_not_found"
    assert (ws / "a.py").read_text() == "x = 1\n"


def test_equal_strings_refused(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\n")
    result = read_then_edit(toolset, filePath="a.py", oldString="x = 1", newString="x = 1")
    assert result.outcome == "old_string_equals_new_string"


def test_empty_old_string_refused(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\n")
    result = read_then_edit(toolset, filePath="a.py", oldString="", newString="boom")
    assert result.outcome == "empty_old_string"
    assert (ws / "a.py").read_text() == "x = 1\n"


def test_binary_file_refused(toolset: ToolSet, ws: Path) -> None:
    (ws / "b.bin").write_bytes(b"x\x00y")
    result = read_then_edit(toolset, filePath="b.bin", oldString="x", newString="z")
    assert result.outcome == "binary_file"


def test_hard_linked_file_refused_and_outside_untouched(
    toolset: ToolSet, ws: Path, outside: Path
) -> None:
    os.link(outside / "secret.txt", ws / "hl.txt")
    result = read_then_edit(toolset, filePath="hl.txt", oldString="TOP", newString="NOT")
    assert result.outcome == "hard_link"
    assert (outside / "secret.txt").read_text() == SECRET


def test_file_too_large_refused(toolset: ToolSet, ws: Path) -> None:
    (ws / "big.txt").write_text("a" * (1024 * 1024 + 1))
    result = read_then_edit(toolset, filePath="big.txt", oldString="a", newString="b")
    assert result.outcome == "file_too_large"


def test_a_file_not_read_is_refused_and_untouched(toolset: ToolSet, ws: Path) -> None:
    """OpenCode's rule: an edit quotes text the session has seen."""
    (ws / "a.py").write_text("x = 1\n")
    result = call(toolset, "edit", filePath="a.py", oldString="x = 1", newString="x = 2")
    assert result.outcome == "file_not_read"
    assert "read the file" in result.output
    assert (ws / "a.py").read_text() == "x = 1\n"
    call(toolset, "read", filePath="a.py")
    again = call(toolset, "edit", filePath="a.py", oldString="x = 1", newString="x = 2")
    assert again.outcome == "ok"


def test_what_counts_as_seen(toolset: ToolSet, ws: Path) -> None:
    """Written whole by the agent: seen. Another file read, or a read that failed: not."""
    assert call(toolset, "write", filePath="w.py", content="a = 1\n").outcome == "ok"
    edit_w = {"filePath": "w.py", "oldString": "a = 1", "newString": "a = 2"}
    assert call(toolset, "edit", **edit_w).outcome == "ok"
    (ws / "b.py").write_text("b = 1\n")
    call(toolset, "read", filePath="w.py")
    edit_b = {"filePath": "b.py", "oldString": "b = 1", "newString": "b = 2"}
    assert call(toolset, "edit", **edit_b).outcome == "file_not_read"
    assert call(toolset, "read", filePath="c.py").outcome == "not_found"
    (ws / "c.py").write_text("c = 1\n")
    edit_c = {"filePath": "c.py", "oldString": "c = 1", "newString": "c = 2"}
    assert call(toolset, "edit", **edit_c).outcome == "file_not_read"
