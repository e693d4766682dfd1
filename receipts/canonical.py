"""The one canonical JSON encoding (docs/engineering.md §7) and its strict inverse.

Everything that is hashed or compared goes through `canonical`. `parse_canonical` is the
reader's side: it accepts only bytes that `canonical` itself would have produced, so two
different byte strings can never stand for the same record. Its strictness (duplicate
keys, NaN/Infinity, overflowing floats) is `receipts.strictjson`'s, shared with every
other reader of untrusted JSON; this module adds only the byte-for-byte check.
"""

from __future__ import annotations

import json
import math
from typing import Literal

from receipts.strictjson import JsonValue, StrictJsonError, StrictJsonKind, loads_strict

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


_FAILURE: dict[StrictJsonKind, CanonicalFailure] = {
    "invalid_json": "json_invalid",
    "duplicate_key": "json_duplicate_key",
    "non_finite_number": "json_non_finite",
}


def parse_canonical(data: bytes) -> JsonValue:
    """Parse `data`, refusing anything `canonical` would not have written byte for byte."""
    try:
        value = loads_strict(data)
    except StrictJsonError as exc:
        raise CanonicalError(_FAILURE[exc.kind]) from exc
    try:
        written = canonical(value)
    except UnicodeEncodeError:  # a lone surrogate escape (`"\\ud800"`): no UTF-8 form exists
        raise CanonicalError("json_not_canonical") from None
    if written != data:
        raise CanonicalError("json_not_canonical")
    return value
