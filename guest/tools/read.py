"""`read {filePath, offset?, limit?}`: a text file, line-numbered as OpenCode does.

Output is `00001| text` lines inside `<file>...</file>`, 0-based `offset`, 2,000
lines by default, lines cut at 2,000 characters, and the whole output capped at
50 KB. Reading is streamed line by line with a bound on bytes scanned, so a huge
file or a single gigantic line costs bounded time and memory. Binary files
(a NUL byte or invalid UTF-8 in the first 8 KiB) are refused, not rendered.
"""

from __future__ import annotations

import codecs
import os
from typing import Annotated

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.bounded import BoundedText, utf8_len
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.result import ToolOutput, refusal

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 50 * 1024
SNIFF_BYTES = 8192
MAX_SCAN_BYTES = 64 * 1024 * 1024
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

    def __init__(self, jail: Jail) -> None:
        self._jail = jail

    def target(self, args: ReadArgs) -> str:
        return args.filePath

    def run(self, args: ReadArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        offset = args.offset or 0
        limit = args.limit or DEFAULT_LIMIT
        try:
            with self._jail.regular_file(path) as (fd, _st):
                if looks_binary(os.pread(fd, SNIFF_BYTES, 0)):
                    return refusal("binary_file")
                return _render(fd, offset, limit)
        except JailError as exc:
            return refusal(exc.category)


def _render(fd: int, offset: int, limit: int) -> ToolOutput:
    body = BoundedText(MAX_OUTPUT_BYTES)
    scanned = 0
    lineno = 0
    more = False
    scan_exhausted = False
    with os.fdopen(os.dup(fd), "rb", buffering=65536) as stream:
        while True:
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
            if lineno < offset:
                lineno += 1
                continue
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
    if body.full or scan_exhausted:
        shown = offset + body.text.count("\n")
        note = f"(Output truncated. Use 'offset' parameter to read beyond line {shown})"
    elif more:
        note = f"(File has more lines. Use 'offset' parameter to read beyond line {lineno})"
    else:
        note = f"(End of file - total {lineno} lines)"
    text = f"<file>\n{body.text}\n{note}\n</file>"
    return ToolOutput(
        outcome="ok", text=text, truncated=body.truncated, omitted_bytes=body.omitted_bytes
    )
