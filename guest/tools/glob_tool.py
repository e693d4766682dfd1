"""`glob {pattern, path?}`: files whose path matches a glob, sorted by path.

OpenCode sorts by modification time; we sort by path so the same workspace always
gives the same answer. Patterns follow `globpattern` (ripgrep-style: `*.py`
matches at any depth, `src/**/*.py` is anchored). Paths printed are relative to
the workspace root; the pattern is matched relative to `path`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.bounded import BoundedText
from guest.tools.globpattern import MAX_PATTERN_CHARS, PatternError, compile_glob
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.result import ToolOutput, refusal
from guest.tools.walk import WalkBudget, walk

MAX_RESULTS = 100
MAX_OUTPUT_BYTES = 32 * 1024


class GlobArgs(BaseModel):
    model_config = ARGS_CONFIG
    pattern: Annotated[
        str,
        Field(
            max_length=4 * MAX_PATTERN_CHARS,
            description="Glob pattern such as '**/*.py' or 'src/*.{ts,tsx}'",
        ),
    ]
    path: Annotated[
        str | None,
        Field(
            max_length=4096,
            description="Directory to search, relative to the workspace root (default: root)",
        ),
    ] = None


class GlobTool(Tool[GlobArgs]):
    name = "glob"
    description = (
        "Finds files in the workspace whose path matches a glob pattern ('**/*.py', "
        "'*.{js,ts}'). Returns paths relative to the workspace root, sorted, at most 100."
    )
    args_model = GlobArgs

    def __init__(self, jail: Jail) -> None:
        self._jail = jail

    def target(self, args: GlobArgs) -> str:
        return args.path or ""

    def run(self, args: GlobArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        try:
            glob = compile_glob(args.pattern)
        except PatternError as exc:
            return refusal(exc.category)
        budget = WalkBudget()
        body = BoundedText(MAX_OUTPUT_BYTES)
        found = 0
        try:
            base = len(path.parts)
            for entry in walk(self._jail, path, budget):
                if entry.kind != "file":
                    continue
                if not glob.matches("/".join(entry.path.parts[base:])):
                    continue
                found += 1
                line = entry.path.text + "\n"
                if found > MAX_RESULTS or not body.add(line):
                    body.count_omitted(len(line.encode("utf-8")))
        except JailError as exc:
            return refusal(exc.category)
        if budget.exhausted:
            body.mark_incomplete()
        text = "No files found\n" if found == 0 else body.text
        if body.truncated:
            text += "(Results are truncated. Use a more specific path or pattern.)\n"
        return ToolOutput(
            outcome="ok", text=text, truncated=body.truncated, omitted_bytes=body.omitted_bytes
        )
