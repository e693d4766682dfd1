"""canonical() is the one serializer; parse_canonical() accepts only its output."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from receipts.canonical import CanonicalError, canonical, parse_canonical

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def test_canonical_form_is_sorted_compact_utf8() -> None:
    assert canonical({"b": 1, "a": ["é", None, True]}) == '{"a":["é",null,true],"b":1}'.encode()


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -float("inf"), {"x": [float("nan")]}]
)
def test_non_finite_numbers_are_refused(value: object) -> None:
    with pytest.raises(CanonicalError) as info:
        canonical(value)
    assert info.value.category == "json_non_finite"


@pytest.mark.parametrize(
    ("data", "category"),
    [
        (b'{"a":NaN}', "json_non_finite"),
        (b'{"a":Infinity}', "json_non_finite"),
        (b'{"a":1e999}', "json_non_finite"),
        (b'{"a":1,"a":1}', "json_duplicate_key"),
        (b'{"a":1', "json_invalid"),
        (b'\xff{"a":1}', "json_invalid"),
        (b'{"a": 1}', "json_not_canonical"),
        (b'{"b":1,"a":2}', "json_not_canonical"),
        (b'{"a":"\\u00e9"}', "json_not_canonical"),
        (b'{"a":1}\n', "json_not_canonical"),
        (b'{"a":1.0e0}', "json_not_canonical"),
        (b'{"a":"\\ud800"}', "json_not_canonical"),
    ],
)
def test_parse_refuses_with_category(data: bytes, category: str) -> None:
    with pytest.raises(CanonicalError) as info:
        parse_canonical(data)
    assert info.value.category == category


@given(JSON)
def test_parse_inverts_canonical(value: object) -> None:
    data = canonical(value)
    assert canonical(parse_canonical(data)) == data


@pytest.mark.parametrize("key", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_float_key_is_refused_too(key: float) -> None:
    """json.dumps writes a float key as its text (`{"NaN":1}`); canonical JSON has no such
    number, so it is refused like a non-finite value. (Refused as json.dumps' ValueError,
    not a CanonicalError category: our records' keys are always strings, so no record
    can reach it; the refusal itself is what this pins.)"""
    with pytest.raises(ValueError):
        canonical({key: 1})
