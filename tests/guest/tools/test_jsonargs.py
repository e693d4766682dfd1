"""Strict argument JSON: each malformed input has its own category."""

from __future__ import annotations

import pytest

from guest.tools.jsonargs import MAX_ARGUMENT_CHARS, ArgumentsError, parse_arguments


@pytest.mark.parametrize(
    ("raw", "category"),
    [
        ('{"filePath": "a", "filePath": "b"}', "duplicate_key"),
        ('{"a": {"b": 1, "b": 2}}', "duplicate_key"),
        ('{"offset": NaN}', "non_finite_number"),
        ('{"offset": Infinity}', "non_finite_number"),
        ('{"offset": -Infinity}', "non_finite_number"),
        ('{"offset": 1e400}', "non_finite_number"),
        ('{"filePath": "a"', "invalid_json"),
        ("", "invalid_json"),
        ("[1, 2]", "not_an_object"),
        ('"a"', "not_an_object"),
        ("null", "not_an_object"),
        ('{"filePath": "\\ud800"}', "invalid_encoding"),
        ('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid_json"),
        ('{"x": ' + "1" * 5000 + "}", "invalid_json"),
    ],
)
def test_refusals(raw: str, category: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments(raw)
    assert info.value.category == category


def test_too_large() -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments('{"content": "' + "a" * MAX_ARGUMENT_CHARS + '"}')
    assert info.value.category == "arguments_too_large"


def test_not_a_string() -> None:
    with pytest.raises(ArgumentsError) as info:
        parse_arguments({"filePath": "a"})
    assert info.value.category == "invalid_json"


def test_valid() -> None:
    assert parse_arguments('{"filePath": "a", "offset": 2, "x": 1.5}') == {
        "filePath": "a",
        "offset": 2,
        "x": 1.5,
    }
