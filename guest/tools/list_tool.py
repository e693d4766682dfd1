"""`list {path?}`: the tree under a directory, sorted, bounded, symlinks not followed.

Entries are paths relative to the workspace root (usable as `filePath` as is), one
per line, with a suffix for the kind: `/` directory, `@` symlink (not followed),
`=` special file. Caches such as `.git` are listed but not descended. The walk
examines a bounded number of entries and shows a bounded number of lines.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.bounded import BoundedText
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.result import ToolOutput, refusal
from guest.tools.walk import WalkBudget, walk

MAX_ENTRIES_SHOWN = 500
MAX_OUTPUT_BYTES = 32 * 1024
_SUFFIX = {"file": "", "dir": "/", "symlink": "@", "special": "="}


class ListArgs(BaseModel):
    model_config = ARGS_CONFIG
    path: Annotated[
        str | None,
        Field(
            max_length=4096,
            description="Directory to list, relative to the workspace root (default: root)",
        ),
    ] = None


class ListTool(Tool[ListArgs]):
    name = "list"
    description = (
        "Lists files and directories under a directory of the workspace (recursively, "
        "sorted). Paths are relative to the workspace root; '/' marks a directory, '@' a "
        "symlink (not followed), '=' a special file."
    )
    args_model = ListArgs

    def __init__(self, jail: Jail) -> None:
        self._jail = jail

    def target(self, args: ListArgs) -> str:
        return args.path or ""

    def run(self, args: ListArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        budget = WalkBudget()
        body = BoundedText(MAX_OUTPUT_BYTES)
        shown = 0
        total = 0
        try:
            for entry in walk(self._jail, path, budget):
                total += 1
                line = f"{entry.path.text}{_SUFFIX[entry.kind]}\n"
                if shown < MAX_ENTRIES_SHOWN and body.add(line):
                    shown += 1
                else:
                    body.count_omitted(len(line.encode("utf-8")))
        except JailError as exc:
            return refusal(exc.category)
        if budget.exhausted:
            body.mark_incomplete()
        notes = []
        if shown < total:
            notes.append(f"({total - shown} more entries not shown; list a subdirectory)")
        if budget.exhausted:
            notes.append("(Listing stopped at its bound; list a subdirectory)")
        if budget.skipped_names:
            notes.append(f"({budget.skipped_names} entries with unusable names skipped)")
        if total == 0:
            notes.append("(empty directory)")
        text = body.text + "".join(n + "\n" for n in notes)
        return ToolOutput(
            outcome="ok", text=text, truncated=body.truncated, omitted_bytes=body.omitted_bytes
        )
