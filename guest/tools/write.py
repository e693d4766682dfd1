"""`write {filePath, content}`: create or replace a file, parents created in the jail.

Content is capped so one call cannot fill the guest's disk; the jail writes through
a temporary file and a rename, so a write never lands on an inode outside.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.result import ToolOutput, WriteDetails, refusal
from guest.tools.seen import SeenFiles

MAX_CONTENT_BYTES = 1024 * 1024


class WriteArgs(BaseModel):
    model_config = ARGS_CONFIG
    filePath: Annotated[
        str, Field(max_length=4096, description="Path of the file, relative to the workspace root")
    ]
    content: Annotated[
        str, Field(max_length=MAX_CONTENT_BYTES, description="The full content to write")
    ]


class WriteTool(Tool[WriteArgs]):
    name = "write"
    description = (
        "Writes a file in the workspace, replacing it if it exists and creating parent "
        "directories as needed. filePath is relative to the workspace root. Content is "
        "limited to 1 MiB."
    )
    args_model = WriteArgs

    def __init__(self, jail: Jail, seen: SeenFiles) -> None:
        self._jail = jail
        self._seen = seen

    def target(self, args: WriteArgs) -> str:
        return args.filePath

    def run(self, args: WriteArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        try:
            data = args.content.encode("utf-8")
        except UnicodeEncodeError:
            return refusal("invalid_encoding")
        if len(data) > MAX_CONTENT_BYTES:
            return refusal("content_too_large")
        try:
            created = self._jail.write_file(path, data, create_parents=True)
        except JailError as exc:
            return refusal(exc.category)
        self._seen.saw(path)
        verb = "Created" if created else "Wrote"
        return ToolOutput(
            outcome="ok",
            text=f"{verb} {path.text} ({len(data)} bytes).",
            details=WriteDetails(created=created, bytes_written=len(data)),
        )
