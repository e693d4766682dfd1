"""globpattern: ripgrep-like semantics, linear-time matching, refusals."""

from __future__ import annotations

import time

import pytest

from guest.tools.globpattern import PatternError, compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a.py", True),
        ("*.py", "src/deep/a.py", True),
        ("*.py", "a.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**", "src/x/y", True),
        ("src/**", "lib/x", False),
        ("**", "", True),
        ("*", "", True),
        ("*.{ts,tsx}", "a/b.tsx", True),
        ("*.{ts,tsx}", "a/b.js", False),
        ("[ab]?.txt", "b1.txt", True),
        ("[!ab]?.txt", "b1.txt", False),
        ("[a-c]*", "cat", True),
        ("\\*.txt", "*.txt", True),
        ("\\*.txt", "a.txt", False),
        ("*.env", "config/.env", True),
    ],
)
def test_semantics(pattern: str, path: str, expected: bool) -> None:
    assert compile_glob(pattern).matches(path) is expected


@pytest.mark.parametrize(
    ("pattern", "category"),
    [
        ("", "invalid_pattern"),
        ("/abs/*", "invalid_pattern"),
        ("a/../b", "invalid_pattern"),
        ("[abc", "invalid_pattern"),
        ("{a,{b}}", "invalid_pattern"),
        ("a}", "invalid_pattern"),
        ("[z-a]", "invalid_pattern"),
        ("x" * 513, "pattern_too_long"),
        ("{a,b}" * 7, "invalid_pattern"),  # 128 alternatives
    ],
)
def test_refusals(pattern: str, category: str) -> None:
    with pytest.raises(PatternError) as info:
        compile_glob(pattern)
    assert info.value.category == category


def test_pathological_pattern_is_fast() -> None:
    glob = compile_glob("*a*a*a*a*a*a*a*a*a*a*b")
    deep = compile_glob("**/" * 100 + "b")
    start = time.monotonic()
    assert not glob.matches("a" * 250)
    assert not deep.matches("/".join(["a"] * 300))
    assert time.monotonic() - start < 1.0
