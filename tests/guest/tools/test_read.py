"""read: OpenCode's numbered format, paging, caps with exact counts, refusals."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from guest.tools import read
from guest.tools.jail import Jail, parse_relative
from guest.tools.registry import ToolSet
from guest.tools.seen import SeenFiles
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


def _read(jail: Jail, name: str, deadline_s: float = read.DEFAULT_DEADLINE_S, **args: int) -> Any:
    tool = read.ReadTool(jail, SeenFiles(), deadline_s=deadline_s)
    return tool.run(read.ReadArgs(filePath=name, **args), parse_relative(name))


def test_offset_past_the_scan_bound_is_fast_and_names_the_line_reached(
    jail: Jail, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of 1-byte lines a little past the scan bound (70 MiB). The skip is counted
    in chunks, so it ends well within a 2 s deadline (line by line it took 18 s on a
    200 MB file), and the note names the last line scanned, not the offset asked for."""
    with (ws / "n.txt").open("wb") as handle:
        for _ in range(70):
            handle.write(b"\n" * (1 << 20))
    started = time.monotonic()
    result = _read(jail, "n.txt", deadline_s=2.0, offset=10**9)
    assert result.outcome == "ok"
    assert time.monotonic() - started < 2.0
    assert f"scan bound after line {read.MAX_SCAN_BYTES};" in result.text
    assert "1000000000" not in result.text
    assert result.truncated
    # Past its deadline the skip stops at once, not after scanning the bound: count the
    # bytes it reads (the real reads, only observed).
    read_bytes = []
    real_pread = os.pread

    def counting_pread(fd: int, size: int, offset: int) -> bytes:
        data = real_pread(fd, size, offset)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    late = _read(jail, "n.txt", deadline_s=-1.0, offset=10**9)
    assert late.outcome == "deadline_exceeded"
    assert sum(read_bytes) <= read.SNIFF_BYTES


def test_paging_lands_on_the_right_line_across_chunks(jail: Jail, ws: Path) -> None:
    """Offsets around the 1 MiB chunk edges start at exactly line offset+1."""
    lines = [f"{i}\n".encode() for i in range(400_000)]
    (ws / "n.txt").write_bytes(b"".join(lines))
    position = 0
    first_after_chunk = 0
    for index, line in enumerate(lines):  # the first line that starts past 1 MiB
        position += len(line)
        if position >= read._CHUNK:
            first_after_chunk = index + 1
            break
    for offset in (0, 1, first_after_chunk - 1, first_after_chunk, first_after_chunk + 1, 399_999):
        result = _read(jail, "n.txt", offset=offset, limit=2)
        assert result.outcome == "ok"
        assert f"{offset + 1:05d}| {offset}\n" in result.text, offset
        assert f"| {offset - 1}\n" not in result.text


def test_offset_counts_a_last_line_without_newline(jail: Jail, ws: Path) -> None:
    (ws / "t.txt").write_bytes(b"a\nb")
    assert "00002| b\n" in _read(jail, "t.txt", offset=1).text
    assert "(End of file - total 2 lines)" in _read(jail, "t.txt", offset=2).text
    assert "(End of file - total 2 lines)" in _read(jail, "t.txt", offset=9).text


@pytest.mark.parametrize("offset", [0, 5])
def test_read_past_its_deadline_is_refused(jail: Jail, ws: Path, offset: int) -> None:
    """A deadline already passed: the skip (offset 5) and the line loop (offset 0) each
    stop with the closed category, not with a partial answer."""
    (ws / "t.txt").write_text("x\n" * 10)
    assert _read(jail, "t.txt", deadline_s=-1.0, offset=offset).outcome == "deadline_exceeded"
    assert _read(jail, "t.txt", deadline_s=5.0, offset=offset).outcome == "ok"
