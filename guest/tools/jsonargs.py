"""Strict parsing of a tool call's `arguments` JSON string.

Models emit malformed, truncated or ambiguous JSON (FIELD-NOTES.md, Peers). We
refuse rather than guess: duplicate keys (which value did the model mean?),
NaN/Infinity and overflowing floats (not JSON), non-objects, lone surrogates, and
oversized input each get their own closed category, and nothing of the input is
kept in the error.
"""

from __future__ import annotations

import json
import math
from typing import Any

from guest.tools.categories import DispatchRefusal, JailRefusal

MAX_ARGUMENT_CHARS = 8 * 1024 * 1024


class ArgumentsError(ValueError):
    def __init__(self, category: DispatchRefusal | JailRefusal) -> None:
        super().__init__(category)
        self.category: DispatchRefusal | JailRefusal = category


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ArgumentsError("duplicate_key")
        out[key] = value
    return out


def _constant(_name: str) -> Any:
    raise ArgumentsError("non_finite_number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ArgumentsError("non_finite_number")
    return value


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
        value = json.loads(
            raw, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float
        )
    except ArgumentsError:
        raise
    except (ValueError, RecursionError) as exc:
        raise ArgumentsError("invalid_json") from exc
    if not isinstance(value, dict):
        raise ArgumentsError("not_an_object")
    _check_strings(value)
    return value
