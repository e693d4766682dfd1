"""Strict parsing of a tool call's `arguments` JSON string.

Models emit malformed, truncated or ambiguous JSON (FIELD-NOTES.md, Peers). We
refuse rather than guess: duplicate keys (which value did the model mean?),
NaN/Infinity and overflowing floats (not JSON), non-objects, lone surrogates, and
oversized input each get their own closed category, and nothing of the input is
kept in the error. What "strict JSON" means is `receipts.strictjson`'s, shared with
receipts, the worker's tool-call check and its API bodies; the size limit, the
object shape and the lone-surrogate check are this caller's own.
"""

from __future__ import annotations

from typing import Any

from guest.tools.categories import DispatchRefusal, JailRefusal
from receipts.strictjson import StrictJsonError, StrictJsonKind, loads_strict

MAX_ARGUMENT_CHARS = 8 * 1024 * 1024


class ArgumentsError(ValueError):
    def __init__(self, category: DispatchRefusal | JailRefusal) -> None:
        super().__init__(category)
        self.category: DispatchRefusal | JailRefusal = category


_REFUSAL: dict[StrictJsonKind, DispatchRefusal] = {
    "invalid_json": "invalid_json",
    "duplicate_key": "duplicate_key",
    "non_finite_number": "non_finite_number",
}


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ArgumentsError("invalid_encoding") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_arguments(raw: object) -> dict[str, Any]:
    """The arguments as a dict, or ArgumentsError with a closed category."""
    if not isinstance(raw, str):
        raise ArgumentsError("invalid_json")
    if len(raw) > MAX_ARGUMENT_CHARS:
        raise ArgumentsError("arguments_too_large")
    try:
        value = loads_strict(raw)
    except StrictJsonError as exc:
        raise ArgumentsError(_REFUSAL[exc.kind]) from exc
    if not isinstance(value, dict):
        raise ArgumentsError("not_an_object")
    _check_strings(value)
    return value
