"""Parse and validate a generated tool call before it leaves the worker.

The grammar should make an invalid call impossible; this is the check that does not
trust the grammar (a backend bug, a schema keyword the compiler got wrong). Anything
that fails here is the closed outcome `invalid_model_output`, never passed on and never
replaced by a guess. `arguments` goes out as a JSON string, as the OpenAI API defines it.

A string the grammar had to stop at its cap (`Limits.max_string_chars`, where the
schema allows more) may have been cut mid-thought: a call holding a string that long
is refused as `tool_argument_too_long`, never returned shortened; an array the grammar
stopped at its item cap (`Limits.max_array_items`) likewise, as
`tool_argument_too_many_items`. One grammar unit is
one code point (the grammar has no surrogate escapes), so `len` measures what it counted.
The body is read by `receipts.strictjson`, the one definition of strict JSON; every way
it refuses is `json_invalid` here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema
from jsonschema.protocols import Validator

from guest.worker.toolgrammar import CALL_CLOSE, CALL_OPEN
from receipts.strictjson import StrictJsonError, loads_strict

InvalidReason = Literal[
    "not_tagged",
    "json_invalid",
    "shape",
    "unknown_tool",
    "schema",
    "string_at_cap",
    "array_at_cap",
]


class InvalidModelOutput(Exception):
    def __init__(self, reason: InvalidReason) -> None:
        super().__init__(reason)
        self.reason: InvalidReason = reason


class SchemaInvalid(ValueError):
    """A tool's `parameters` is not a valid JSON Schema."""


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments_json: str


def schema_validator(schema: dict[str, Any]) -> Validator:
    """A validator for *schema* in the draft it declares (2020-12 by default)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SchemaInvalid("parameters") from exc
    return cls(schema)


def longest_string(value: Any) -> int:
    """The length of the longest string (value or key) anywhere in *value*."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((max(len(k), longest_string(v)) for k, v in value.items()), default=0)
    if isinstance(value, list):
        return max((longest_string(v) for v in value), default=0)
    return 0


def longest_array(value: Any) -> int:
    """The length of the longest array anywhere in *value*."""
    if isinstance(value, dict):
        return max((longest_array(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((len(value), *(longest_array(v) for v in value)))
    return 0


def parse_tool_call(
    text: str,
    validators: dict[str, Validator],
    max_string_chars: int | None = None,
    max_array_items: int | None = None,
) -> ParsedCall:
    """The call in *text* (`<tool_call>\\n{...}\\n</tool_call>`), validated, or raise.

    *max_string_chars*: the grammar's string cap; a string that reached it is
    `string_at_cap`; *max_array_items*: its array cap, `array_at_cap` (module docstring)."""
    head, tail = CALL_OPEN + "\n", "\n" + CALL_CLOSE
    if not (text.startswith(head) and text.endswith(tail)) or len(text) < len(head + tail):
        raise InvalidModelOutput("not_tagged")
    body = text[len(head) : len(text) - len(tail)]
    try:
        obj = loads_strict(body)
    except StrictJsonError as exc:
        raise InvalidModelOutput("json_invalid") from exc
    if not isinstance(obj, dict) or set(obj) != {"name", "arguments"}:
        raise InvalidModelOutput("shape")
    name, arguments = obj["name"], obj["arguments"]
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise InvalidModelOutput("shape")
    validator = validators.get(name)
    if validator is None:
        raise InvalidModelOutput("unknown_tool")
    if not validator.is_valid(arguments):
        raise InvalidModelOutput("schema")
    if max_string_chars is not None and longest_string(arguments) >= max_string_chars:
        raise InvalidModelOutput("string_at_cap")
    if max_array_items is not None and longest_array(arguments) >= max_array_items:
        raise InvalidModelOutput("array_at_cap")
    try:
        encoded = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        encoded.encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        raise InvalidModelOutput("json_invalid") from exc
    return ParsedCall(name, encoded)
