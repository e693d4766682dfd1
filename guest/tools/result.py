"""The typed result of one tool invocation.

`output` is the text for the model. It is excluded from every dump of the model
(`exclude=True`), so a record built from `ToolResult.model_dump()` cannot carry
file contents, test logs or model-written text into a receipt (docs/engineering.md §3).
The short messages for refusals are fixed per category and never echo the input.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from guest.tools.categories import (
    EditMatch,
    NetIsolation,
    NetMechanism,
    Outcome,
    RunExit,
    ToolName,
)
from guest.tools.permissions import PermissionDecision
from receipts.records.agent import CgroupEnd

_FROZEN = ConfigDict(extra="forbid", frozen=True, strict=True)
NonNegInt = Annotated[int, Field(ge=0, le=2**53)]


class EditDetails(BaseModel):
    """What an edit did: how it matched and how many occurrences it replaced."""

    model_config = _FROZEN
    kind: Literal["edit"] = "edit"
    match: EditMatch
    replacements: NonNegInt


class WriteDetails(BaseModel):
    """Whether a write created a new file or replaced an existing one."""

    model_config = _FROZEN
    kind: Literal["write"] = "write"
    created: bool
    bytes_written: NonNegInt


class RunTestsDetails(BaseModel):
    """How the test command ended and under which isolation (no command text)."""

    model_config = _FROZEN
    kind: Literal["run_tests"] = "run_tests"
    exit: RunExit
    returncode: int | None
    net_isolation: NetIsolation
    net_mechanism: NetMechanism
    cgroup_end: CgroupEnd | None = None
    """How the call's cgroup ended; None when the command ran unconfined (tests only)."""
    output_bytes: NonNegInt


Details = Annotated[EditDetails | WriteDetails | RunTestsDetails, Field(discriminator="kind")]


class ToolResult(BaseModel):
    """One tool call's result. `output` goes to the model only, never to a dump."""

    model_config = _FROZEN
    tool: ToolName | None  # None when the model named no known tool
    outcome: Outcome
    output: str = Field(exclude=True, repr=False)
    bytes_out: NonNegInt
    bytes_before_truncation: NonNegInt
    truncated: bool
    duration_ms: NonNegInt
    permission: PermissionDecision | None = None
    details: Details | None = None


@dataclass(frozen=True)
class ToolOutput:
    """What a tool hands back to the registry before timing and final bounding.

    `omitted_bytes` counts output bytes the tool's own caps dropped; `truncated`
    is also set when a scan stopped early without a byte count (a deadline).
    """

    outcome: Outcome
    text: str
    truncated: bool = False
    omitted_bytes: int = 0
    details: EditDetails | WriteDetails | RunTestsDetails | None = None


# One fixed, short message per category. The registry appends nothing the model
# sent, so an invalid argument never comes back to it as text (or into a log).
MESSAGES: dict[str, str] = {
    "ok": "OK.",
    "absolute_path": "Refused: paths must be relative to the workspace root.",
    "parent_component": "Refused: '..' is not allowed in paths.",
    "nul_byte": "Refused: the path contains a NUL byte.",
    "control_character": "Refused: the path contains a control character.",
    "line_separator": "Refused: the path contains a Unicode line or paragraph separator.",
    "bidi_control": "Refused: the path contains a bidirectional text control.",
    "invalid_encoding": "Refused: the text is not valid UTF-8.",
    "path_too_long": "Refused: the path is too long.",
    "symlink": "Refused: the path goes through a symbolic link.",
    "special_file": "Refused: not a regular file or directory.",
    "hard_link": "Refused: the file has more than one hard link.",
    "cross_device": "Refused: the path crosses a mount point.",
    "not_found": "Error: no such file or directory.",
    "not_a_directory": "Error: a path component is not a directory.",
    "is_a_directory": "Error: the path is a directory.",
    "path_changed": "Error: the path changed while it was being opened; retry.",
    "os_denied": "Error: the operating system denied access.",
    "os_error": "Error: the operating system reported an error.",
    "binary_file": "Refused: the file is binary.",
    "file_too_large": "Refused: the file is too large for this tool.",
    "content_too_large": "Refused: the content is too large.",
    "empty_old_string": "Refused: oldString is empty; use the write tool to create a file.",
    "old_string_equals_new_string": "Refused: oldString and newString must be different.",
    "old_string_not_found": (
        "Error: oldString not found in the file. Read the file to see its exact text."
    ),
    "file_not_read": "Refused: read the file before editing it; oldString must be its exact text.",
    "multiple_matches": (
        "Error: oldString matches more than once. Add surrounding lines to make it "
        "unique, or set replaceAll."
    ),
    "invalid_pattern": "Error: the pattern is not valid.",
    "pattern_too_long": "Refused: the pattern is too long.",
    "spawn_failed": "Error: the test command could not be started.",
    "net_isolation_unavailable": "Error: the test command cannot run without a network here.",
    "deadline_exceeded": "Error: the tool ran past its time limit.",
    "unknown_tool": "Error: unknown tool.",
    "arguments_too_large": "Error: the arguments are too large.",
    "invalid_json": "Error: the arguments are not valid JSON.",
    "duplicate_key": "Error: the arguments repeat a key.",
    "non_finite_number": "Error: the arguments contain NaN or Infinity.",
    "not_an_object": "Error: the arguments must be a JSON object.",
    "invalid_arguments": "Error: the arguments do not match the tool's schema.",
    "permission_denied": "Refused: permission denied by policy.",
}


def all_outcomes() -> tuple[str, ...]:
    """Every `Outcome` value, for checks that each has a fixed message."""
    return typing.get_args(Outcome)


def refusal(outcome: Outcome) -> ToolOutput:
    """A tool output for a refusal: the category's fixed message and nothing else."""
    return ToolOutput(outcome=outcome, text=MESSAGES[outcome])
