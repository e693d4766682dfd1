"""`edit {filePath, oldString, newString, replaceAll?}`: exact string replacement.

Only an exact match counts, and only a unique one unless `replaceAll` is set,
because an edit applied at a guessed location corrupts the workspace silently.
OpenCode falls back to fuzzy replacers; we do not (yet), and record the match
kind as the closed category `exact` so a later fuzzy mode is visible in results.
An empty `oldString` is refused rather than meaning "overwrite the file" as it
does in OpenCode: the write tool does that, explicitly. As in OpenCode, a file this
session has not read (or written) is refused (`file_not_read`, guest/tools/seen.py).
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.read import looks_binary
from guest.tools.result import EditDetails, ToolOutput, refusal
from guest.tools.seen import SeenFiles

MAX_FILE_BYTES = 1024 * 1024
MAX_STRING_CHARS = 1024 * 1024


class EditArgs(BaseModel):
    model_config = ARGS_CONFIG
    filePath: Annotated[
        str, Field(max_length=4096, description="Path of the file, relative to the workspace root")
    ]
    oldString: Annotated[
        str, Field(max_length=MAX_STRING_CHARS, description="The exact text to replace")
    ]
    newString: Annotated[
        str,
        Field(
            max_length=MAX_STRING_CHARS,
            description="The text to replace it with (must differ from oldString)",
        ),
    ]
    replaceAll: Annotated[
        bool | None,
        Field(description="Replace every occurrence of oldString (default false)"),
    ] = None


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got <= size:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class EditTool(Tool[EditArgs]):
    name = "edit"
    description = (
        "Performs an exact string replacement in a file in the workspace. filePath is "
        "relative to the workspace root. oldString must match the file's text exactly "
        "(including indentation) and must be unique unless replaceAll is true. "
        "oldString and newString must differ. Read the file first: an edit of a file "
        "not read in this session is refused."
    )
    args_model = EditArgs

    def __init__(self, jail: Jail, seen: SeenFiles) -> None:
        self._jail = jail
        self._seen = seen

    def target(self, args: EditArgs) -> str:
        return args.filePath

    def run(self, args: EditArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        if args.oldString == "":
            return refusal("empty_old_string")
        if args.oldString == args.newString:
            return refusal("old_string_equals_new_string")
        try:
            with self._jail.regular_file(path) as (fd, _st):
                raw = _read_all(fd, MAX_FILE_BYTES)  # reads at most one chunk past the cap
            if len(raw) > MAX_FILE_BYTES:
                return refusal("file_too_large")
            if looks_binary(raw):
                return refusal("binary_file")
            try:
                content = raw.decode("utf-8")
            except UnicodeDecodeError:
                return refusal("binary_file")
            if not self._seen.has_seen(path):  # an editable file, not read: guest/tools/seen.py
                return refusal("file_not_read")
            count = content.count(args.oldString)
            if count == 0:
                return refusal("old_string_not_found")
            if count > 1 and not args.replaceAll:
                return refusal("multiple_matches")
            replaced = count if args.replaceAll else 1
            updated = content.replace(args.oldString, args.newString, replaced)
            try:
                data = updated.encode("utf-8")
            except UnicodeEncodeError:
                return refusal("invalid_encoding")
            if len(data) > MAX_FILE_BYTES:
                return refusal("content_too_large")
            self._jail.write_file(path, data, create_parents=False)
        except JailError as exc:
            return refusal(exc.category)
        noun = "occurrence" if replaced == 1 else "occurrences"
        return ToolOutput(
            outcome="ok",
            text=f"Edit applied successfully: replaced {replaced} {noun}.",
            details=EditDetails(match="exact", replacements=replaced),
        )
