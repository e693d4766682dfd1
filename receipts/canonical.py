"""The one canonical JSON encoding (STANDARDS.md §7) and its strict inverse.

Everything that is hashed or compared goes through `canonical`. `parse_canonical` is the
reader's side: it accepts only bytes that `canonical` itself would have produced, so two
different byte strings can never stand for the same record.
"""

from __future__ import annotations

import json
import math
from typing import Literal

JsonScalar = str | int | float | bool | None
JsonValue = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]

CanonicalFailure = Literal[
    "json_invalid",
    "json_duplicate_key",
    "json_non_finite",
    "json_not_canonical",
]


class CanonicalError(ValueError):
    """Bytes that are not canonical JSON; `category` says which way they fail."""

    def __init__(self, category: CanonicalFailure) -> None:
        super().__init__(category)
        self.category: CanonicalFailure = category


def _refuse_non_finite(obj: object) -> None:
    """Walk `obj` and refuse NaN and infinities before json.dumps sees them.

    `allow_nan=False` already refuses them, but with a ValueError whose text names the
    value; this gives the caller one stable category instead.
    """
    stack: list[object] = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise CanonicalError("json_non_finite")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def canonical(obj: object) -> bytes:
    """Serialize `obj` as canonical JSON bytes (sorted keys, no spaces, UTF-8)."""
    _refuse_non_finite(obj)
    text = json.dumps(
        obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return text.encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
    result: dict[str, JsonValue] = {}
    for key, value in pairs:
        if key in result:
            raise CanonicalError("json_duplicate_key")
        result[key] = value
    return result


def _no_constants(_name: str) -> JsonValue:
    raise CanonicalError("json_non_finite")


def parse_canonical(data: bytes) -> JsonValue:
    """Parse `data`, refusing anything `canonical` would not have written byte for byte."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise CanonicalError("json_invalid") from exc
    try:
        value: JsonValue = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants
        )
    except CanonicalError:
        raise
    except (ValueError, RecursionError) as exc:
        raise CanonicalError("json_invalid") from exc
    # canonical() refuses the infinity that 1e999 parses to (parse_constant never sees it)
    if canonical(value) != data:
        raise CanonicalError("json_not_canonical")
    return value
