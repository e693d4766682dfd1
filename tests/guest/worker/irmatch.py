"""A direct interpreter of the grammar IR, for testing what a grammar admits.

Independent of both backends: if the IR is wrong, llguidance and GBNF are wrong the
same way, so the language is checked here against the schema validator.
"""

from __future__ import annotations

from functools import cache

from guest.worker.grammar import (
    Alt,
    Chars,
    GNode,
    Grammar,
    Lit,
    Ref,
    Rep,
    Seq,
    Special,
    Terminal,
)


def matches(grammar: Grammar, text: str) -> bool:
    rules = dict(grammar.rules)

    @cache
    def ends(node: GNode, i: int) -> frozenset[int]:
        if isinstance(node, Lit | Special):
            return frozenset({i + len(node.text)}) if text.startswith(node.text, i) else frozenset()
        if isinstance(node, Chars):
            if i >= len(text):
                return frozenset()
            cp = ord(text[i])
            inside = any(lo <= cp <= hi for lo, hi in node.ranges)
            return frozenset({i + 1}) if inside != node.negated else frozenset()
        if isinstance(node, Seq):
            positions = frozenset({i})
            for item in node.items:
                positions = frozenset(e for p in positions for e in ends(item, p))
            return positions
        if isinstance(node, Alt):
            return frozenset(e for o in node.options for e in ends(o, i))
        if isinstance(node, Rep):
            out: set[int] = set()
            frontier = {i}
            for count in range(node.max + 1):
                if count >= node.min:
                    out |= frontier
                if not frontier or count == node.max:
                    break
                frontier = {e for p in frontier for e in ends(node.item, p) if e > p}
            return frozenset(out)
        if isinstance(node, Ref):
            return ends(rules[node.name], i)
        if isinstance(node, Terminal):
            return ends(node.item, i)
        raise TypeError(node)

    return len(text) in ends(rules[grammar.start], 0)


def node_matches(node: GNode, text: str) -> bool:
    return matches(Grammar((("start", node),)), text)
