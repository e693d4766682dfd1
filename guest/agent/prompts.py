"""The fixed texts the loop sends: the system prompt, and one short message per kind of
invalid call. None of them quotes the model's output (an invalid call is never replayed)."""

from __future__ import annotations

from receipts.records.agent import InvalidCallCategory

SYSTEM_PROMPT = (
    "You are a coding agent working in a project directory. Use the tools to read files, "
    "make edits and run the tests. Paths are relative to the project directory. Make the "
    "smallest change that solves the task, run the tests, then call the finish tool."
)

OMITTED_CALL = "(an invalid tool call was omitted)"

INVALID_CALL_MESSAGE: dict[InvalidCallCategory, str] = {
    "unknown_tool": "That tool does not exist. Call one of the listed tools.",
    "arguments_too_large": "The tool arguments were too large.",
    "invalid_json": "The tool arguments were not valid JSON. Send one JSON object.",
    "duplicate_key": "The tool arguments repeated a key. Send each key once.",
    "non_finite_number": "The tool arguments contained a non-finite number.",
    "not_an_object": "The tool arguments must be one JSON object.",
    "invalid_arguments": "The tool arguments did not match the tool's parameters.",
    "malformed_tool_call": "The tool call was malformed. Call one tool with JSON arguments.",
    "multiple_tool_calls": "Call one tool at a time.",
}
