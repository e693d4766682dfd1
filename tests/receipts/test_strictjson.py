"""loads_strict: one refusal per kind, in document order, and plain JSON accepted."""

from __future__ import annotations

import pytest

from receipts.strictjson import StrictJsonError, loads_strict


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ('{"a": 1, "a": 1}', "duplicate_key"),
        ('[{"x": {"b": 1, "b": 2}}]', "duplicate_key"),
        (b'{"a":1,"a":2}', "duplicate_key"),
        ('{"a": NaN}', "non_finite_number"),
        ('{"a": Infinity}', "non_finite_number"),
        ("[-Infinity]", "non_finite_number"),
        ('{"a": 1e999}', "non_finite_number"),
        ("-1e400", "non_finite_number"),
        (b"[1E+999]", "non_finite_number"),
        ('{"a": 1', "invalid_json"),
        ("", "invalid_json"),
        ('{"a": 1} x', "invalid_json"),
        ("'a'", "invalid_json"),
        (b'\xff{"a":1}', "invalid_json"),
        (b'{"a":"\xff"}', "invalid_json"),
        (b'{"a":"\xed\xa0\x80"}', "invalid_json"),
        ('\ufeff{"a": 1}', "invalid_json"),
        (b'\xef\xbb\xbf{"a":1}', "invalid_json"),
        ('{"a": 1}'.encode("utf-16"), "invalid_json"),
        ("[" * 100_000 + "]" * 100_000, "invalid_json"),
        ("1" * 5000, "invalid_json"),
    ],
)
def test_refusals(data: str | bytes, kind: str) -> None:
    with pytest.raises(StrictJsonError) as info:
        loads_strict(data)
    assert info.value.kind == kind
    assert str(info.value) == kind  # the message is the kind, never the input


def test_refusal_comes_in_document_order() -> None:
    with pytest.raises(StrictJsonError) as info:
        loads_strict('[1e999, {"a": 1, "a": 2}]')
    assert info.value.kind == "non_finite_number"
    with pytest.raises(StrictJsonError) as info:
        loads_strict('[{"a": 1, "a": 2}, NaN]')
    assert info.value.kind == "duplicate_key"


def test_duplicate_key_is_offered_to_the_caller() -> None:
    with pytest.raises(StrictJsonError) as info:
        loads_strict('{"model": 1, "model": 2}')
    assert info.value.key == "model"
    with pytest.raises(StrictJsonError) as info:
        loads_strict("[NaN]")
    assert info.value.key is None


GOOD = '{"a": [1, -2.5, 1e308, 0.0, -0.0, true, false, null, "\\u00e9", "é"], "b": {"a": 1}}'


@pytest.mark.parametrize("data", [GOOD, GOOD.encode()])
def test_accepts_strict_json(data: str | bytes) -> None:
    value = loads_strict(data)
    assert value == {"a": [1, -2.5, 1e308, 0.0, -0.0, True, False, None, "é", "é"], "b": {"a": 1}}


def test_accepts_the_same_key_in_different_objects() -> None:
    assert loads_strict('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]


def test_is_a_value_error() -> None:
    # callers that catch ValueError around parsing keep refusing, never crash
    assert issubclass(StrictJsonError, ValueError)
