"""A small grammar IR rendered both as llguidance Lark and as llama.cpp GBNF.

Why one IR: the two backends must admit the same language, or the fallback would
quietly change what the model may say. Every repetition in the IR carries an upper
bound (`Rep.max`), so neither rendering can contain an unbounded loop: a weak model
cannot fill a string until `max_tokens` and cut the JSON.

Lark specifics (llguidance): sub-trees that are purely regular are wrapped in
`Terminal` and rendered as one `/regex/` lexeme (JSON strings, numbers, free text);
the rest are rules. Special tokens (`<tool_call>`) are written in llguidance's token
syntax in Lark and as literal text in GBNF (llama.cpp matches token pieces).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Chars:
    """A character class: inclusive code point ranges, or their complement."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Seq:
    items: tuple[GNode, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[GNode, ...]


@dataclass(frozen=True)
class Rep:
    item: GNode
    min: int
    max: int


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Special:
    """A special token by its text, e.g. `<tool_call>`."""

    text: str


@dataclass(frozen=True)
class Terminal:
    """A regular sub-language that llguidance should lex as one lexeme."""

    item: GNode


GNode = Lit | Chars | Seq | Alt | Rep | Ref | Special | Terminal


class GrammarError(ValueError):
    """The IR is malformed (a bug in a builder, never user input)."""


@dataclass(frozen=True)
class Grammar:
    """Named rules; `start` is the entry. Names match `[a-z][a-z0-9]*` for both syntaxes."""

    rules: tuple[tuple[str, GNode], ...]
    start: str = "start"
    _rendered: dict[str, str] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """Each rendering is made once: the compile step renders it off the event loop and
    the generation thread finds it here (and the matcher cache keyed by it)."""

    def to_lark(self) -> str:
        text = self._rendered.get("lark")
        if text is None:
            lines = [f"start: {_lark(Ref(self.start))}"] if self.start != "start" else []
            lines += [f"{name}: {_lark(node)}" for name, node in self.rules]
            text = self._rendered["lark"] = "\n".join(lines) + "\n"
        return text

    def to_gbnf(self) -> str:
        text = self._rendered.get("gbnf")
        if text is None:
            lines = [f"root ::= {_gbnf(Ref(self.start))}"]
            lines += [f"{name} ::= {_gbnf(node)}" for name, node in self.rules]
            text = self._rendered["gbnf"] = "\n".join(lines) + "\n"
        return text


# -- Lark rendering -----------------------------------------------------------------

_REGEX_SAFE: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ ")


def _rx_char(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if ch in _REGEX_SAFE and not (in_class and ch == " "):
        return ch
    return f"\\x{{{cp:X}}}"


def _regex(node: GNode) -> str:
    if isinstance(node, Lit):
        return "".join(_rx_char(ord(c), False) for c in node.text) if node.text else "(?:)"
    if isinstance(node, Chars):
        body = "".join(
            _rx_char(lo, True) if lo == hi else f"{_rx_char(lo, True)}-{_rx_char(hi, True)}"
            for lo, hi in node.ranges
        )
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, Seq):
        return "".join(_regex(i) for i in node.items) if node.items else "(?:)"
    if isinstance(node, Alt):
        return "(?:" + "|".join(_regex(o) for o in node.options) + ")"
    if isinstance(node, Rep):
        return f"(?:{_regex(node.item)}){{{node.min},{node.max}}}"
    if isinstance(node, Terminal):
        return _regex(node.item)
    raise GrammarError("not regular")


def _lark(node: GNode) -> str:
    if isinstance(node, Lit):
        return json.dumps(node.text, ensure_ascii=False) if node.text else '""'
    if isinstance(node, Chars | Terminal):
        return "/" + _regex(node).replace("/", "\\/") + "/"
    if isinstance(node, Seq):
        return "(" + " ".join(_lark(i) for i in node.items) + ")" if node.items else '""'
    if isinstance(node, Alt):
        return "(" + " | ".join(_lark(o) for o in node.options) + ")"
    if isinstance(node, Rep):
        return f"({_lark(node.item)}){{{node.min},{node.max}}}"
    if isinstance(node, Ref):
        return node.name
    if isinstance(node, Special):
        return node.text
    raise GrammarError("unknown node")


# -- GBNF rendering -----------------------------------------------------------------


def _gbnf_char(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    special = '"\\' if not in_class else "]\\^-["
    if 0x20 <= cp < 0x7F and ch not in special:
        return ch
    if cp <= 0xFF:
        return f"\\x{cp:02X}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


def _gbnf(node: GNode) -> str:
    if isinstance(node, Lit | Special):
        return '"' + "".join(_gbnf_char(ord(c), False) for c in node.text) + '"'
    if isinstance(node, Chars):
        body = "".join(
            _gbnf_char(lo, True) if lo == hi else f"{_gbnf_char(lo, True)}-{_gbnf_char(hi, True)}"
            for lo, hi in node.ranges
        )
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, Seq):
        return "(" + " ".join(_gbnf(i) for i in node.items) + ")" if node.items else '""'
    if isinstance(node, Alt):
        return "(" + " | ".join(_gbnf(o) for o in node.options) + ")"
    if isinstance(node, Rep):
        return f"({_gbnf(node.item)}){{{node.min},{node.max}}}"
    if isinstance(node, Ref):
        return node.name
    if isinstance(node, Terminal):
        return _gbnf(node.item)
    raise GrammarError("unknown node")
