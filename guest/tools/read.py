"""`read {filePath, offset?, limit?}`: a text file, line-numbered as OpenCode does.

Output is `00001| text` lines inside `<file>...</file>`, 0-based `offset`, 2,000
lines by default, lines cut at 2,000 characters, and the whole output capped at
50 KB. Lines before `offset` are counted in 1 MiB chunks (a million 1-byte lines cost
milliseconds, not a Python step each); the requested lines are streamed one by one.
Both phases share a bound on bytes scanned from the start of the file and a wall-clock
deadline (`deadline_exceeded`), so a huge file or a gigantic line costs bounded time
and memory, and the note names the last line actually reached. Binary files
(a NUL byte or invalid UTF-8 in the first 8 KiB) are refused, not rendered.
"""

from __future__ import annotations

import codecs
import os
import time
from typing import Annotated

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.bounded import BoundedText, utf8_len
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.result import ToolOutput, refusal
from guest.tools.seen import SeenFiles

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 50 * 1024
SNIFF_BYTES = 8192
MAX_SCAN_BYTES = 64 * 1024 * 1024
DEFAULT_DEADLINE_S = 5.0  # wall clock per call, as grep's; past it: `deadline_exceeded`
_CHUNK = 1 << 20  # lines before `offset` are counted a chunk at a time, never one by one
_LINE_READ = MAX_LINE_CHARS * 4 + 4  # enough bytes for MAX_LINE_CHARS characters


class ReadArgs(BaseModel):
    model_config = ARGS_CONFIG
    filePath: Annotated[
        str, Field(max_length=4096, description="Path of the file, relative to the workspace root")
    ]
    offset: Annotated[
        int | None,
        Field(ge=0, le=10**9, description="The line number to start reading from (0-based)"),
    ] = None
    limit: Annotated[
        int | None,
        Field(ge=1, le=100_000, description="The number of lines to read (defaults to 2000)"),
    ] = None


def looks_binary(sample: bytes) -> bool:
    """NUL or invalid UTF-8 in the sample (a multibyte char cut at its end is fine)."""
    if b"\x00" in sample:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        return True
    return False


class ReadTool(Tool[ReadArgs]):
    name = "read"
    description = (
        "Reads a text file in the workspace. filePath is relative to the workspace root. "
        "Returns lines prefixed with 5-digit line numbers ('00001| '). By default reads up "
        "to 2000 lines from the start; use offset (0-based line) and limit to page. Lines "
        "longer than 2000 characters are cut; output is capped at 50 KB."
    )
    args_model = ReadArgs

    def __init__(
        self, jail: Jail, seen: SeenFiles, *, deadline_s: float = DEFAULT_DEADLINE_S
    ) -> None:
        self._jail = jail
        self._seen = seen
        self._deadline_s = deadline_s

    def target(self, args: ReadArgs) -> str:
        return args.filePath

    def run(self, args: ReadArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        offset = args.offset or 0
        limit = args.limit or DEFAULT_LIMIT
        deadline = time.monotonic() + self._deadline_s
        try:
            with self._jail.regular_file(path) as (fd, _st):
                if looks_binary(os.pread(fd, SNIFF_BYTES, 0)):
                    return refusal("binary_file")
                output = _render(fd, offset, limit, deadline)
        except JailError as exc:
            return refusal(exc.category)
        except _DeadlinePassed:
            return refusal("deadline_exceeded")
        self._seen.saw(path)
        return output


class _DeadlinePassed(Exception):
    """The read ran past its wall-clock bound."""


def _nth_newline(chunk: bytes, n: int) -> int:
    """Index of the n-th (1-based) newline in `chunk`, which holds at least n of them.

    A binary search over `bytes.count`, so a chunk of a million 1-byte lines costs about
    twenty C-level counts instead of a million Python steps."""
    low, high = 0, len(chunk)
    while low < high:
        middle = (low + high) // 2
        if chunk.count(b"\n", 0, middle) >= n:
            high = middle
        else:
            low = middle + 1
    return low - 1


def _skip_lines(fd: int, offset: int, deadline: float) -> tuple[int, int, bool]:
    """Skip `offset` lines in chunks: (byte position after them, lines skipped, whether the
    scan bound stopped the skip). A last line with no newline counts as a line."""
    position = 0
    skipped = 0
    last = b"\n"
    while skipped < offset:
        if time.monotonic() > deadline:
            raise _DeadlinePassed
        if position >= MAX_SCAN_BYTES:
            return position, skipped, True
        chunk = os.pread(fd, min(_CHUNK, MAX_SCAN_BYTES - position), position)
        if not chunk:
            return position, skipped + (last != b"\n"), False
        last = chunk[-1:]
        newlines = chunk.count(b"\n")
        if newlines < offset - skipped:
            skipped += newlines
            position += len(chunk)
            continue
        return position + _nth_newline(chunk, offset - skipped) + 1, offset, False
    return position, skipped, False


def _render(fd: int, offset: int, limit: int, deadline: float) -> ToolOutput:
    body = BoundedText(MAX_OUTPUT_BYTES)
    scanned, lineno, scan_exhausted = _skip_lines(fd, offset, deadline)
    more = False
    with os.fdopen(os.dup(fd), "rb", buffering=65536) as stream:
        stream.seek(scanned)
        while not scan_exhausted:
            if time.monotonic() > deadline:
                raise _DeadlinePassed
            if scanned > MAX_SCAN_BYTES:
                scan_exhausted = True
                break
            raw = stream.readline(_LINE_READ)
            if not raw:
                break
            scanned += len(raw)
            tail = 0
            if not raw.endswith(b"\n"):
                # The line is longer than we read: skip its remainder, counting it.
                while scanned <= MAX_SCAN_BYTES:
                    rest = stream.readline(65536)
                    if not rest:
                        break
                    scanned += len(rest)
                    tail += len(rest)
                    if rest.endswith(b"\n"):
                        break
            if lineno >= offset + limit:
                more = True
                break
            text = raw.rstrip(b"\n").decode("utf-8", "replace")
            lineno += 1
            if len(text) > MAX_LINE_CHARS or tail:
                kept = text[:MAX_LINE_CHARS]
                body.count_omitted(utf8_len(text) - utf8_len(kept) + tail)
                text = kept + "..."
            body.add(f"{lineno:05d}| {text}\n")
    if scan_exhausted:
        body.mark_incomplete()
    if body.full:
        shown = offset + body.text.count("\n")
        note = f"(Output truncated. Use 'offset' parameter to read beyond line {shown})"
    elif scan_exhausted:
        # Every line up to `lineno` was scanned (and shown from `offset` on); the bound
        # is on bytes from the start of the file, so no offset reaches past it.
        note = (
            f"(Read stopped at its {MAX_SCAN_BYTES >> 20} MiB scan bound after line "
            f"{lineno}; later lines cannot be read with this tool, try grep)"
        )
    elif more:
        note = f"(File has more lines. Use 'offset' parameter to read beyond line {lineno})"
    else:
        note = f"(End of file - total {lineno} lines)"
    text = f"<file>\n{body.text}\n{note}\n</file>"
    return ToolOutput(
        outcome="ok", text=text, truncated=body.truncated, omitted_bytes=body.omitted_bytes
    )
