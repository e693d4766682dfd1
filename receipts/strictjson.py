"""The one strict JSON reader for untrusted input.

Why one parser: receipts, tool arguments, model output (tool calls) and the worker's
API bodies all read JSON that someone else wrote; each hooking `json.loads` its own way
makes "strict" mean slightly different things in each place (one lets `1e999` through
as an infinity, another checks it only after the whole document parsed). This module
is the single definition. Refused here, in document order:

- `duplicate_key`: an object repeats a key (which value was meant?);
- `non_finite_number`: `NaN`, `Infinity`, `-Infinity`, or a number literal that
  overflows a float (`1e999`), none of which is JSON a finite reader can keep;
- `invalid_json`: anything else that is not one JSON document, including bytes that
  are not UTF-8 (no UTF-16/32 sniffing, unlike `json.loads` on bytes), a byte order
  mark, nesting deep enough to exhaust the recursion limit, and integer literals
  beyond the interpreter's digit limit.

Each caller maps the closed `kind` onto its own closed category; checks that belong to
one caller (tool-argument size and lone surrogates, canonical byte form, the shape of a
request) stay with that caller. The error carries no input, except that a refused
duplicate key is offered as `key` for callers that name it (the worker's `param`).
Stdlib only: it ships in the guest runtime.
"""

from __future__ import annotations

import json
import math
from typing import Literal

JsonScalar = str | int | float | bool | None
JsonValue = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]

StrictJsonKind = Literal["invalid_json", "duplicate_key", "non_finite_number"]


class StrictJsonError(ValueError):
    """Input that is not strict JSON; `kind` says which way it fails."""

    def __init__(self, kind: StrictJsonKind, key: str | None = None) -> None:
        super().__init__(kind)
        self.kind: StrictJsonKind = kind
        self.key: str | None = key


def _pairs(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
    result: dict[str, JsonValue] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJsonError("duplicate_key", key)
        result[key] = value
    return result


def _constant(_name: str) -> JsonValue:
    raise StrictJsonError("non_finite_number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJsonError("non_finite_number")
    return value


def loads_strict(text: str | bytes) -> JsonValue:
    """Parse one JSON document, or raise `StrictJsonError` with a closed `kind`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise StrictJsonError("invalid_json") from exc
    try:
        value: JsonValue = json.loads(
            text, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float
        )
    except StrictJsonError:
        raise
    except (ValueError, RecursionError) as exc:
        raise StrictJsonError("invalid_json") from exc
    return value
