"""read: OpenCode's numbered format, paging, caps with exact counts, refusals."""

from __future__ import annotations

from pathlib import Path

from guest.tools import read
from guest.tools.registry import ToolSet
from tests.guest.tools.support import call


def test_numbered_lines_in_opencode_format(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.py").write_text("first\nsecond\n")
    result = call(toolset, "read", filePath="a.py")
    assert result.outcome == "ok"
    assert result.output == (
        "<file>\n00001| first\n00002| second\n\n(End of file - total 2 lines)\n</file>"
    )
    assert not result.truncated
    assert result.bytes_out == result.bytes_before_truncation == len(result.output.encode())


def test_offset_is_zero_based_and_limit_pages(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    result = call(toolset, "read", filePath="a.txt", offset=3, limit=2)
    assert "00004| line4\n00005| line5\n" in result.output
    assert "00003|" not in result.output
    assert "00006|" not in result.output
    assert "read beyond line 5" in result.output


def test_default_limit_is_2000_lines(toolset: ToolSet, ws: Path) -> None:
    (ws / "big.txt").write_text("x\n" * 2500)
    result = call(toolset, "read", filePath="big.txt")
    assert "02000| x" in result.output
    assert "02001|" not in result.output
    assert "File has more lines" in result.output


def test_long_line_cut_at_2000_chars_and_counted(toolset: ToolSet, ws: Path) -> None:
    (ws / "long.txt").write_text("a" * 5000 + "\nb\n")
    result = call(toolset, "read", filePath="long.txt")
    assert "00001| " + "a" * 2000 + "...\n" in result.output
    assert "a" * 2001 not in result.output
    assert "00002| b" in result.output
    assert result.truncated
    assert result.bytes_before_truncation - result.bytes_out == 3000


def test_output_capped_at_50_kb_with_exact_count(toolset: ToolSet, ws: Path) -> None:
    line = "y" * 99
    (ws / "wide.txt").write_text((line + "\n") * 1000)
    result = call(toolset, "read", filePath="wide.txt")
    per_line = len(f"00001| {line}\n")
    kept = result.output.count("| ")
    assert kept == read.MAX_OUTPUT_BYTES // per_line
    assert result.truncated
    assert f"read beyond line {kept})" in result.output
    # Exactly the lines not shown are counted as omitted.
    assert result.bytes_before_truncation - result.bytes_out == (1000 - kept) * per_line


def test_binary_file_refused(toolset: ToolSet, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"abc\x00def")
    assert call(toolset, "read", filePath="blob.bin").outcome == "binary_file"


def test_invalid_utf8_refused_as_binary(toolset: ToolSet, ws: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9 au lait\n")
    assert call(toolset, "read", filePath="latin.txt").outcome == "binary_file"


def test_directory_and_missing(toolset: ToolSet, ws: Path) -> None:
    (ws / "d").mkdir()
    assert call(toolset, "read", filePath="d").outcome == "is_a_directory"
    assert call(toolset, "read", filePath="nope.txt").outcome == "not_found"


def test_absolute_path_refused_through_the_tool(toolset: ToolSet, outside: Path) -> None:
    result = call(toolset, "read", filePath=str(outside / "secret.txt"))
    assert result.outcome == "absolute_path"
    assert "SECRET" not in result.output
