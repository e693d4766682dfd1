"""Glob patterns (`*`, `?`, `[...]`, `**`, `{a,b}`) matched without a regex engine.

Used by the glob tool, grep's `include`, and permission rules, so one pattern means
one thing everywhere. Semantics follow ripgrep/gitignore globs: a pattern without
`/` matches the last path component at any depth; a pattern with `/` matches the
whole relative path; `*` and `?` never cross `/`; `**` as a whole component spans
any number of components (including none).

Matching is the greedy two-pointer wildcard algorithm, at two levels (components,
then characters), so time is O(pattern * path) with no backtracking blow-up: a
hostile pattern cannot stall the agent the way a regex translation could.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MAX_PATTERN_CHARS = 512
MAX_ALTERNATIVES = 64


class PatternError(ValueError):
    """A pattern the matcher refuses; `category` is the closed reason."""

    def __init__(self, category: Literal["invalid_pattern", "pattern_too_long"]) -> None:
        super().__init__(category)
        self.category: Literal["invalid_pattern", "pattern_too_long"] = category


@dataclass(frozen=True)
class _Star:
    """`*` inside a component: any run of characters (never `/`)."""


@dataclass(frozen=True)
class _One:
    """`?`: exactly one character."""


@dataclass(frozen=True)
class _Lit:
    char: str


@dataclass(frozen=True)
class _Class:
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def accepts(self, char: str) -> bool:
        hit = any(lo <= char <= hi for lo, hi in self.ranges)
        return hit != self.negated


_CharTok = _Star | _One | _Lit | _Class
_Segment = tuple[_CharTok, ...]


@dataclass(frozen=True)
class _GlobStar:
    """`**` as a whole component: any number of components."""


_SegTok = _GlobStar | _Segment


def _char_eq(tok: _CharTok, char: str) -> bool:
    if isinstance(tok, _One):
        return True
    if isinstance(tok, _Lit):
        return tok.char == char
    if isinstance(tok, _Class):
        return tok.accepts(char)
    return False


def _match_chars(pattern: _Segment, text: str) -> bool:
    """Greedy wildcard match of one component; `_Star` is the only wildcard run."""
    p = s = 0
    star_p, star_s = -1, 0
    while s < len(text):
        if p < len(pattern) and isinstance(pattern[p], _Star):
            star_p, star_s = p, s
            p += 1
        elif p < len(pattern) and _char_eq(pattern[p], text[s]):
            p += 1
            s += 1
        elif star_p >= 0:
            p = star_p + 1
            star_s += 1
            s = star_s
        else:
            return False
    while p < len(pattern) and isinstance(pattern[p], _Star):
        p += 1
    return p == len(pattern)


def _match_segments(pattern: tuple[_SegTok, ...], parts: tuple[str, ...]) -> bool:
    """The same greedy algorithm one level up: `**` is the wildcard run."""
    p = s = 0
    star_p, star_s = -1, 0
    while s < len(parts):
        tok = pattern[p] if p < len(pattern) else None
        if isinstance(tok, _GlobStar):
            star_p, star_s = p, s
            p += 1
        elif tok is not None and _match_chars(tok, parts[s]):
            p += 1
            s += 1
        elif star_p >= 0:
            p = star_p + 1
            star_s += 1
            s = star_s
        else:
            return False
    while p < len(pattern) and isinstance(pattern[p], _GlobStar):
        p += 1
    return p == len(pattern)


def _expand_braces(pattern: str) -> list[str]:
    """Expand one level of `{a,b}` alternatives; nested braces are refused."""
    out = [""]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out = [o + pattern[i : i + 2] for o in out]
            i += 2
            continue
        if ch == "{":
            end = pattern.find("}", i + 1)
            if end < 0:
                raise PatternError("invalid_pattern")
            body = pattern[i + 1 : end]
            if "{" in body:
                raise PatternError("invalid_pattern")
            alts = body.split(",")
            out = [o + a for o in out for a in alts]
            if len(out) > MAX_ALTERNATIVES:
                raise PatternError("invalid_pattern")
            i = end + 1
            continue
        if ch == "}":
            raise PatternError("invalid_pattern")
        out = [o + ch for o in out]
        i += 1
    return out


def _parse_class(text: str, i: int) -> tuple[_Class, int]:
    """Parse `[...]` starting at text[i] == '['; return the class and the next index."""
    j = i + 1
    negated = j < len(text) and text[j] in "!^"
    if negated:
        j += 1
    ranges: list[tuple[str, str]] = []
    first = True
    while j < len(text) and (text[j] != "]" or first):
        first = False
        lo = text[j]
        if lo == "\\" and j + 1 < len(text):
            j += 1
            lo = text[j]
        if j + 2 < len(text) and text[j + 1] == "-" and text[j + 2] != "]":
            hi = text[j + 2]
            if hi < lo:
                raise PatternError("invalid_pattern")
            ranges.append((lo, hi))
            j += 3
        else:
            ranges.append((lo, lo))
            j += 1
    if j >= len(text):
        raise PatternError("invalid_pattern")
    return _Class(tuple(ranges), negated), j + 1


def _parse_segment(text: str) -> _SegTok:
    if text == "**":
        return _GlobStar()
    toks: list[_CharTok] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "*":
            while i < len(text) and text[i] == "*":
                i += 1
            toks.append(_Star())
            continue
        if ch == "?":
            toks.append(_One())
        elif ch == "[":
            cls, i = _parse_class(text, i)
            toks.append(cls)
            continue
        elif ch == "\\" and i + 1 < len(text):
            i += 1
            toks.append(_Lit(text[i]))
        else:
            toks.append(_Lit(ch))
        i += 1
    return tuple(toks)


@dataclass(frozen=True)
class Glob:
    """A compiled glob. `matches` takes a `/`-separated path relative to a root."""

    alternatives: tuple[tuple[bool, tuple[_SegTok, ...]], ...]  # (basename_only, segments)

    def matches(self, rel_path: str) -> bool:
        parts = tuple(p for p in rel_path.split("/") if p)
        last = parts[-1:] if parts else ("",)
        return any(
            _match_segments(segs, last if basename_only else parts)
            for basename_only, segs in self.alternatives
        )


def compile_glob(pattern: str) -> Glob:
    """Compile `pattern`, refusing over-long, absolute, `..` and malformed patterns."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError("pattern_too_long")
    if pattern == "" or "\x00" in pattern or pattern.startswith("/"):
        raise PatternError("invalid_pattern")
    alternatives: list[tuple[bool, tuple[_SegTok, ...]]] = []
    for alt in _expand_braces(pattern):
        segments = [s for s in alt.split("/") if s not in ("", ".")]
        if any(s == ".." for s in segments) or alt.startswith("/"):
            raise PatternError("invalid_pattern")
        basename_only = "/" not in alt.strip("/")
        alternatives.append((basename_only, tuple(_parse_segment(s) for s in segments)))
    return Glob(tuple(alternatives))
