"""The `qwen_tagged_tool_json_v1` grammar: a final text answer, or one tagged tool call.

    <tool_call>\n{"name": "<tool>", "arguments": <object valid for that tool>}\n</tool_call>

That is the form Qwen2.5/Qwen3 chat templates teach. The text alternative excludes the
substring `<tool_call>` (spelled with any tokens), so an answer can never be half a
call, and its length is bounded like everything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from guest.worker.grammar import Alt, Chars, GNode, Grammar, Lit, Ref, Rep, Seq, Special, Terminal
from guest.worker.schema_grammar import CompileBudget, Limits, SchemaCompiler, UnsupportedSchema

CALL_OPEN: Final = "<tool_call>"
CALL_CLOSE: Final = "</tool_call>"
CALL_PREFIX: Final = CALL_OPEN + '\n{"name": '
CALL_SUFFIX: Final = "}\n" + CALL_CLOSE

Mode = Literal["none", "auto", "required"]


@dataclass(frozen=True)
class ToolSpec:
    """One entry of the request's `tools`: its name and its parameters schema."""

    name: str
    parameters: dict[str, Any]


def text_without(pattern: str, max_units: int) -> GNode:
    """Any text that does not contain *pattern* (which must start with its only `<`).

    Units are a non-`<` character, or a run of proper prefixes of the pattern followed
    by a character that breaks the match; the text may end in a proper prefix.
    """
    if not pattern.startswith("<") or "<" in pattern[1:]:
        raise ValueError("pattern must contain exactly one leading '<'")
    lt = ord("<")
    prefixes = [pattern[:k] for k in range(1, len(pattern))]
    prefix_any: GNode = Alt(tuple(Lit(p) for p in prefixes))
    breaks: list[GNode] = []
    for prefix in prefixes:
        nxt = ord(pattern[len(prefix)])
        excluded = sorted({nxt, lt})
        breaks.append(Seq((Lit(prefix), Chars(tuple((c, c) for c in excluded), negated=True))))
    unit = Alt(
        (
            Chars(((lt, lt),), negated=True),
            Seq((Rep(prefix_any, 0, max_units), Alt(tuple(breaks)))),
        )
    )
    return Terminal(Seq((Rep(unit, 0, max_units), Rep(prefix_any, 0, 1))))


def text_units(text: str, pattern: str = CALL_OPEN) -> int:
    """How many of `text_without(pattern, ...)`'s units *text* is, so that the worker can
    tell a text the grammar stopped at its cap from one the model ended.

    A unit is one character other than `<`, or a run of proper prefixes of *pattern*
    ended by a character that continues neither the prefix nor a new one (counted once,
    as the grammar counts it); a proper prefix left at the end is no unit. The split is
    unique: at a `<`, the longest prefix of *pattern* is read, and the character after
    it either starts the next prefix (`<`) or ends the unit.
    """
    units, i, n = 0, 0, len(text)
    while i < n:
        if text[i] != "<":
            units, i = units + 1, i + 1
            continue
        while i < n and text[i] == "<":
            k = 1
            while k < len(pattern) - 1 and i + k < n and text[i + k] == pattern[k]:
                k += 1
            i += k
        if i < n:
            units, i = units + 1, i + 1
    return units


def build_tool_grammars(
    tools: list[ToolSpec],
    mode: Mode,
    limits: Limits,
    *,
    special_tags: bool,
    budget: CompileBudget | None = None,
) -> tuple[Grammar, Grammar]:
    """The grammars for *tools*, from one compile: (llguidance form, GBNF form).

    `required` drops the text alternative, `none` the calls. `special_tags`: the
    vocabulary has `<tool_call>`/`</tool_call>` as single tokens that llguidance treats
    as special (matched by token, not by spelling); the GBNF form always spells them.
    The two forms share every rule except `call`, so the schemas are compiled once per
    request. Raises `UnsupportedSchema` for a
    schema outside the subset and `SchemaTooComplex` past *budget*.
    """
    if not tools:
        raise UnsupportedSchema("tools")
    compiler = SchemaCompiler(limits, budget or CompileBudget())
    calls: list[GNode] = []
    for tool in tools:
        if tool.parameters.get("type", "object") != "object":
            raise UnsupportedSchema("parameters.type")
        schema = dict(tool.parameters)
        schema.setdefault("type", "object")
        args = compiler.compile(schema, schema)
        head = Lit(json.dumps(tool.name, ensure_ascii=False) + ', "arguments": ')
        calls.append(compiler.add_rule("c", Seq((head, args))))
    body = calls[0] if len(calls) == 1 else Alt(tuple(calls))
    text = text_without(CALL_OPEN, limits.max_text_chars)

    def grammar(special: bool) -> Grammar:
        open_tag: GNode = Special(CALL_OPEN) if special else Lit(CALL_OPEN)
        close_tag: GNode = Special(CALL_CLOSE) if special else Lit(CALL_CLOSE)
        call = Seq((open_tag, Lit('\n{"name": '), body, Lit("}\n"), close_tag))
        if mode == "none":
            return Grammar((("start", text),))
        rules = [*compiler.rules, ("call", call)]
        if mode == "required":
            rules.append(("start", Ref("call")))
        else:
            rules.append(("text", text))
            rules.append(("start", Alt((Ref("text"), Ref("call")))))
        return Grammar(tuple(rules))

    plain = grammar(False)
    return (grammar(True) if special_tags else plain), plain


def build_tool_grammar(
    tools: list[ToolSpec], mode: Mode, limits: Limits, *, special_tags: bool
) -> Grammar:
    """One form of `build_tool_grammars` (tests and benchmarks that need only one)."""
    first, plain = build_tool_grammars(tools, mode, limits, special_tags=special_tags)
    return first if special_tags else plain
