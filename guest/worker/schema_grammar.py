"""Compile a tool's JSON Schema (a closed subset) to the grammar IR, with every bound set.

Why a subset, refused loudly outside it: the grammar must admit only output that the
schema validates, and keywords the grammar cannot enforce (`pattern`, `uniqueItems`,
`oneOf`, `multipleOf`...) would let the model produce calls that fail validation at
random. A request whose tool uses one gets a 400 naming the keyword, not a silent
fallback to "any JSON".

Output form is what Qwen models were trained on: `json.dumps` separators (`", "`,
`": "`), properties in declared order, optional properties omissible. Annotations
(`description`, `title`, `default`, `examples`, `format`...) are ignored. Objects emit
only declared properties (tighter than `additionalProperties`, still valid).
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from guest.worker.grammar import Alt, Chars, GNode, Lit, Ref, Rep, Seq, Terminal

ANNOTATIONS: Final = frozenset(
    {
        "description",
        "title",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "format",
        "$schema",
        "$id",
        "$defs",
        "definitions",
    }
)
_STRUCTURAL: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "nullable",
    }
)
MAX_DEPTH: Final = 16
"""Deepest nesting of schemas (object, array item, anyOf option, `$ref` target) compiled."""
DIGITS: Final = ((0x30, 0x39),)
INT_LIMIT: Final = 10**15 - 1
"""Integers without bounds are kept to 15 digits (exact in a double)."""


class UnsupportedSchema(ValueError):
    """A tool schema outside the subset; `keyword` names what was refused."""

    def __init__(self, keyword: str) -> None:
        super().__init__(keyword)
        self.keyword = keyword


TooComplexReason = Literal["nesting", "depth", "size", "time"]


class SchemaTooComplex(ValueError):
    """A tool schema inside the subset whose compilation would exceed a bound.

    `nesting`: JSON nesting deeper than the pre-check allows; `depth`: schemas nested
    deeper than `MAX_DEPTH`; `size`: more compile units than `CompileBudget.max_units`;
    `time`: the compile ran past its deadline.
    """

    def __init__(self, reason: TooComplexReason) -> None:
        super().__init__(reason)
        self.reason: TooComplexReason = reason


@dataclass(frozen=True)
class CompileBudget:
    """How much work one request's tool schemas may cost the compiler.

    Why a unit count and not just a timer: with `$ref`s memoized, the work is linear in
    the schema except where a schema repeats a sub-schema in place (`anyOf` or `type`
    lists naming the same shape again, nested), and a count refuses that blow-up before
    it is built, the same on a fast and a loaded machine. The deadline is the backstop
    for everything the count does not see. One unit: a schema node, an `enum` value, a
    `type` entry, a digit of an integer bound; an object member costs three (its
    member, head and tail rules).
    """

    max_units: int = 2048
    deadline: float | None = None
    """`time.monotonic()` value after which compilation stops with `time`."""


@dataclass(frozen=True)
class Limits:
    """Upper bounds the grammar applies where the schema gives none (or a larger one)."""

    max_string_chars: int = 4096
    max_array_items: int = 64
    max_text_chars: int = 32768


STRING_CHAR: Final = Alt(
    (
        Chars(((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)), negated=True),
        Seq((Lit("\\"), Chars(((0x22, 0x22), (0x5C, 0x5C), (0x2F, 0x2F), (0x62, 0x62),
                               (0x66, 0x66), (0x6E, 0x6E), (0x72, 0x72), (0x74, 0x74))))),
        # \uXXXX without surrogates: a lone surrogate cannot be re-encoded as UTF-8.
        Seq((Lit("\\u"), Chars(((0x30, 0x39), (0x41, 0x43), (0x45, 0x46),
                                (0x61, 0x63), (0x65, 0x66))),
             Rep(Chars(((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))), 3, 3))),
        Seq((Lit("\\u"), Chars(((0x44, 0x44), (0x64, 0x64))), Chars(((0x30, 0x37),)),
             Rep(Chars(((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))), 2, 2))),
    )
)  # fmt: skip


def _digit_range(lo: int, hi: int) -> GNode:
    return Lit(str(lo)) if lo == hi else Chars(((0x30 + lo, 0x30 + hi),))


def _same_length(lo: str, hi: str) -> GNode:
    """Decimal strings of equal length from lo to hi inclusive (lo <= hi)."""
    if not lo:
        return Lit("")
    first_lo, first_hi = int(lo[0]), int(hi[0])
    rest = len(lo) - 1
    if first_lo == first_hi:
        return Seq((Lit(lo[0]), _same_length(lo[1:], hi[1:])))
    options: list[GNode] = []
    low_rest, high_rest = lo[1:], hi[1:]
    if low_rest == "0" * rest:
        start = first_lo
    else:
        options.append(Seq((Lit(lo[0]), _same_length(low_rest, "9" * rest))))
        start = first_lo + 1
    end = first_hi if high_rest == "9" * rest else first_hi - 1
    if start <= end:
        options.append(Seq((_digit_range(start, end), Rep(Chars(DIGITS), rest, rest))))
    if high_rest != "9" * rest:
        options.append(Seq((Lit(hi[0]), _same_length("0" * rest, high_rest))))
    return options[0] if len(options) == 1 else Alt(tuple(options))


def nonnegative_range(lo: int, hi: int) -> GNode:
    """Canonical decimals (no leading zeros) for every integer in [lo, hi], lo >= 0."""
    options: list[GNode] = []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        a = max(lo, 10 ** (length - 1) if length > 1 else 0)
        b = min(hi, 10**length - 1)
        if a <= b:
            options.append(_same_length(str(a), str(b)))
    return options[0] if len(options) == 1 else Alt(tuple(options))


@functools.lru_cache(maxsize=256)
def integer_range(lo: int, hi: int) -> GNode:
    """JSON integers in [lo, hi] exactly, with `-0` excluded."""
    options: list[GNode] = []
    if lo < 0:
        options.append(Seq((Lit("-"), nonnegative_range(max(1, -hi) if hi < 0 else 1, -lo))))
    if hi >= 0:
        options.append(nonnegative_range(max(lo, 0), hi))
    return Terminal(options[0] if len(options) == 1 else Alt(tuple(options)))


NUMBER: Final = Terminal(
    Seq(
        (
            Rep(Lit("-"), 0, 1),
            Alt((Lit("0"), Seq((Chars(((0x31, 0x39),)), Rep(Chars(DIGITS), 0, 14))))),
            Rep(Seq((Lit("."), Rep(Chars(DIGITS), 1, 15))), 0, 1),
        )
    )
)


def _literal(value: Any) -> GNode:
    return Lit(json.dumps(value, ensure_ascii=False))


@dataclass
class SchemaCompiler:
    """Turns schemas into rules; one instance per grammar so rule names are unique.

    Each `$ref` target is compiled once per tool, into a rule of its own that every
    reference names (`d<n>`): a schema of 8 properties each referring to the next of
    4 levels of 8 is 5 objects here, not 8^5 inlined copies (inlined, that 1.4 KB schema
    is 112,348 rules and 9.4 MB of Lark). The nesting a
    target adds (`height`) is memoized with it, so `MAX_DEPTH` still bounds the
    nesting of the language wherever the reference appears.
    """

    limits: Limits
    budget: CompileBudget = field(default_factory=CompileBudget)
    rules: list[tuple[str, GNode]] = field(default_factory=list)
    units: int = 0
    _counter: int = 0
    _defs: dict[str, tuple[Ref, int]] = field(default_factory=dict)
    _active: list[str] = field(default_factory=list)
    _deepest: int = 0

    def add_rule(self, prefix: str, node: GNode) -> Ref:
        self._counter += 1
        name = f"{prefix}{self._counter}"
        self.rules.append((name, node))
        return Ref(name)

    def spend(self, units: int) -> None:
        """Count work; `SchemaTooComplex` past the unit budget or the deadline."""
        before = self.units
        self.units += units
        if self.units > self.budget.max_units:
            raise SchemaTooComplex("size")
        deadline = self.budget.deadline
        checkpoint = before // 64 != self.units // 64
        if deadline is not None and checkpoint and time.monotonic() > deadline:
            raise SchemaTooComplex("time")

    def compile(self, schema: Any, root: dict[str, Any], depth: int = 0) -> GNode:
        """One tool's parameters; `$ref`s resolve against *root* (memoized per call)."""
        self._defs = {}
        self._active = []
        self._deepest = depth
        return self._node(schema, root, depth)

    def _node(self, schema: Any, root: dict[str, Any], depth: int) -> GNode:
        if depth > MAX_DEPTH:
            raise SchemaTooComplex("depth")
        self.spend(1)
        self._deepest = max(self._deepest, depth)
        if not isinstance(schema, dict):
            raise UnsupportedSchema("boolean_schema")
        for key in schema:
            if key not in ANNOTATIONS and key not in _STRUCTURAL:
                raise UnsupportedSchema(str(key)[:64])
        if "$ref" in schema:
            return self._ref(schema, root, depth)
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise UnsupportedSchema("enum")
            self.spend(len(values))
            return Alt(tuple(_literal(v) for v in values))
        if "anyOf" in schema:
            options = schema["anyOf"]
            if (
                not isinstance(options, list)
                or not options
                or len(schema) > 2 + len([k for k in schema if k in ANNOTATIONS])
            ):
                raise UnsupportedSchema("anyOf")
            return Alt(tuple(self._node(o, root, depth + 1) for o in options))
        kind = schema.get("type")
        if isinstance(kind, list):
            if not kind or not all(isinstance(k, str) for k in kind):
                raise UnsupportedSchema("type")
            self.spend(len(kind))
            return Alt(tuple(self._typed(k, schema, root, depth) for k in kind))
        if not isinstance(kind, str):
            raise UnsupportedSchema("type")
        node = self._typed(kind, schema, root, depth)
        if schema.get("nullable") is True:
            return Alt((node, Lit("null")))
        return node

    def _ref(self, schema: dict[str, Any], root: dict[str, Any], depth: int) -> GNode:
        target = schema["$ref"]
        if len([k for k in schema if k not in ANNOTATIONS]) != 1 or not isinstance(target, str):
            raise UnsupportedSchema("$ref")
        for prefix, key in (("#/$defs/", "$defs"), ("#/definitions/", "definitions")):
            if target.startswith(prefix):
                name = target[len(prefix) :]
                defs = root.get(key)
                if target in self._active:
                    raise UnsupportedSchema("recursive_ref")
                if isinstance(defs, dict) and name in defs:
                    return self._target(target, defs[name], root, depth + 1)
        raise UnsupportedSchema("$ref")

    def _target(self, target: str, schema: Any, root: dict[str, Any], depth: int) -> Ref:
        """The rule for a `$ref` target, compiled on first use and named after that."""
        known = self._defs.get(target)
        if known is not None:
            ref, height = known
            if depth + height > MAX_DEPTH:
                raise SchemaTooComplex("depth")
            self._deepest = max(self._deepest, depth + height)
            return ref
        outer, self._deepest = self._deepest, depth
        self._active.append(target)
        node = self._node(schema, root, depth)
        self._active.pop()
        height = self._deepest - depth
        self._deepest = max(outer, self._deepest)
        ref = self.add_rule("d", node)
        self._defs[target] = (ref, height)
        return ref

    def _typed(self, kind: str, schema: dict[str, Any], root: dict[str, Any], depth: int) -> GNode:
        if kind == "string":
            return self._string(schema)
        if kind == "integer":
            return self._integer(schema)
        if kind == "number":
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if key in schema:
                    raise UnsupportedSchema(f"number.{key}")
            return NUMBER
        if kind == "boolean":
            return Alt((Lit("true"), Lit("false")))
        if kind == "null":
            return Lit("null")
        if kind == "array":
            return self._array(schema, root, depth)
        if kind == "object":
            return self._object(schema, root, depth)
        raise UnsupportedSchema("type")

    def _bound(self, schema: dict[str, Any], key: str, default: int) -> int:
        value = schema.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise UnsupportedSchema(key)
        return value

    def _string(self, schema: dict[str, Any]) -> GNode:
        low = self._bound(schema, "minLength", 0)
        high = min(self._bound(schema, "maxLength", self.limits.max_string_chars),
                   self.limits.max_string_chars)  # fmt: skip
        if low > high:
            raise UnsupportedSchema("minLength")
        return Terminal(Seq((Lit('"'), Rep(STRING_CHAR, low, high), Lit('"'))))

    def _integer(self, schema: dict[str, Any]) -> GNode:
        def number(key: str) -> int | None:
            value = schema.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UnsupportedSchema(key)
            if isinstance(value, float) and not value.is_integer():
                raise UnsupportedSchema(key)
            return int(value)

        lo, hi = -INT_LIMIT, INT_LIMIT
        if (v := number("minimum")) is not None:
            lo = max(lo, v)
        if (v := number("exclusiveMinimum")) is not None:
            lo = max(lo, v + 1)
        if (v := number("maximum")) is not None:
            hi = min(hi, v)
        if (v := number("exclusiveMaximum")) is not None:
            hi = min(hi, v - 1)
        if lo > hi:
            raise UnsupportedSchema("minimum")
        # A range is built digit by digit (about 60 nodes for two 15-digit bounds,
        # measured 1-2.6 ms): it costs a unit per digit, and equal ranges are shared.
        self.spend(len(str(lo)) + len(str(hi)))
        return integer_range(lo, hi)

    def _array(self, schema: dict[str, Any], root: dict[str, Any], depth: int) -> GNode:
        low = self._bound(schema, "minItems", 0)
        high = min(self._bound(schema, "maxItems", self.limits.max_array_items),
                   self.limits.max_array_items)  # fmt: skip
        if low > high:
            raise UnsupportedSchema("minItems")
        if "items" not in schema:
            raise UnsupportedSchema("items")
        item = self.add_rule("i", self._node(schema["items"], root, depth + 1))
        if high == 0:
            return Lit("[]")
        body = Seq((item, Rep(Seq((Lit(", "), item)), max(low - 1, 0), high - 1)))
        return Seq((Lit("["), body if low > 0 else Rep(body, 0, 1), Lit("]")))

    def _object(self, schema: dict[str, Any], root: dict[str, Any], depth: int) -> GNode:
        props = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(props, dict) or not isinstance(required, list):
            raise UnsupportedSchema("properties")
        if any(name not in props for name in required):
            raise UnsupportedSchema("required")
        extra = schema.get("additionalProperties", True)
        if not isinstance(extra, bool | dict):
            raise UnsupportedSchema("additionalProperties")
        members: list[tuple[Ref, bool]] = []
        for name, sub in props.items():
            self.spend(3)
            value = self._node(sub, root, depth + 1)
            member = self.add_rule("m", Seq((_literal(name), Lit(": "), value)))
            members.append((member, name in required))
        if not members:
            return Lit("{}")
        # head(i): no member emitted yet; tail(i): at least one emitted (next needs ", ").
        n = len(members)
        tails: list[GNode] = [Lit("")] * (n + 1)
        for i in range(n - 1, -1, -1):
            member, needed = members[i]
            with_it = Seq((Lit(", "), member, tails[i + 1]))
            tail: GNode = with_it if needed else Alt((with_it, tails[i + 1]))
            tails[i] = self.add_rule("t", tail)
        heads: list[GNode] = [Lit("")] * (n + 1)
        for i in range(n - 1, -1, -1):
            member, needed = members[i]
            first = Seq((member, tails[i + 1]))
            head: GNode = first if needed else Alt((first, heads[i + 1]))
            heads[i] = self.add_rule("h", head)
        return Seq((Lit("{"), heads[0], Lit("}")))
