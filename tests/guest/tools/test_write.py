"""write: creates parents inside the jail, caps content, refuses what the jail refuses."""

from __future__ import annotations

import os
from pathlib import Path

from guest.tools.registry import ToolSet
from guest.tools.write import MAX_CONTENT_BYTES
from tests.guest.tools.support import call


def test_creates_file_and_parents(toolset: ToolSet, ws: Path) -> None:
    result = call(toolset, "write", filePath="pkg/sub/mod.py", content="x = 1\n")
    assert result.outcome == "ok"
    assert (ws / "pkg" / "sub" / "mod.py").read_text() == "x = 1\n"
    assert result.model_dump()["details"] == {"kind": "write", "created": True, "bytes_written": 6}


def test_replaces_existing_file(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.txt").write_text("old")
    result = call(toolset, "write", filePath="a.txt", content="new")
    assert result.outcome == "ok"
    assert (ws / "a.txt").read_text() == "new"
    assert result.model_dump()["details"]["created"] is False


def test_content_cap(toolset: ToolSet, ws: Path) -> None:
    # Characters within the schema's max_length but more bytes than the cap.
    result = call(toolset, "write", filePath="big.txt", content="é" * (MAX_CONTENT_BYTES // 2 + 1))
    assert result.outcome == "content_too_large"
    assert not (ws / "big.txt").exists()


def test_parent_through_symlink_refused(toolset: ToolSet, ws: Path, outside: Path) -> None:
    os.symlink(outside, ws / "out")
    result = call(toolset, "write", filePath="out/evil.txt", content="x")
    assert result.outcome == "symlink"
    assert not (outside / "evil.txt").exists()


def test_parent_component_refused(toolset: ToolSet, outside: Path) -> None:
    result = call(toolset, "write", filePath="../outside/evil.txt", content="x")
    assert result.outcome == "parent_component"
    assert not (outside / "evil.txt").exists()


def test_root_is_a_directory(toolset: ToolSet) -> None:
    assert call(toolset, "write", filePath=".", content="x").outcome == "is_a_directory"


def test_fifo_target_refused(toolset: ToolSet, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    assert call(toolset, "write", filePath="pipe", content="x").outcome == "special_file"
