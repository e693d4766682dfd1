"""parse_body's JSON edge without a worker process: the same answers as the integration
test test_api_errors.test_body_errors gives over HTTP, for the strict-JSON cases."""

from __future__ import annotations

import json

import pytest

from guest.worker.app import Rejected, parse_body

MESSAGES = '"messages": [{"role": "user", "content": "x"}]'


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", ("invalid_json", None)),
        (b"\xff\xfe", ("invalid_json", None)),
        (b'{"model": "\xff", ' + MESSAGES.encode() + b"}", ("invalid_json", None)),
        (b'{"model": "\xed\xa0\x80", ' + MESSAGES.encode() + b"}", ("invalid_json", None)),
        (b'\xef\xbb\xbf{"model": "tiny", ' + MESSAGES.encode() + b"}", ("invalid_json", None)),
        (b'{"model": "tiny"', ("invalid_json", None)),
        (b'{"model": "tiny", "model": "tiny", "messages": []}', ("duplicate_key", "model")),
        (b'{"model": "t", ' + MESSAGES.encode() + b', "stop": {"k": 1, "k": 2}}',
         ("duplicate_key", "k")),
        (b'{"' + b"k" * 100 + b'": 1, "' + b"k" * 100 + b'": 2}', ("duplicate_key", "k" * 64)),
        (b'{"model": "tiny", ' + MESSAGES.encode() + b', "temperature": NaN}',
         ("non_finite_number", None)),
        (b'{"model": "tiny", ' + MESSAGES.encode() + b', "temperature": -Infinity}',
         ("non_finite_number", None)),
        (b'{"model": "tiny", ' + MESSAGES.encode() + b', "temperature": 1e999}',
         ("non_finite_number", None)),
        (b"[1, 2]", ("invalid_request", None)),
    ],
)  # fmt: skip
def test_strict_json_refusals(body: bytes, expected: tuple[str, str | None]) -> None:
    with pytest.raises(Rejected) as info:
        parse_body(body)
    assert (info.value.status, info.value.code, info.value.param) == (400, *expected)


def test_accepts_a_strict_body() -> None:
    body = json.dumps(
        {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": 0.5}
    ).encode()
    request = parse_body(body)
    assert request.model == "tiny"
    assert request.temperature == 0.5


GOOD = {"model": "tiny", "messages": [{"role": "user", "content": "ok"}]}


def _refusal(body: bytes) -> tuple[int, str, str | None]:
    with pytest.raises(Rejected) as info:
        parse_body(body)
    return info.value.status, info.value.code, info.value.param


@pytest.mark.parametrize(
    ("request_fields", "param"),
    [
        ({"stop": 5}, "stop"),
        ({"tool_choice": 5}, "tool_choice"),
        ({"messages": [{"role": "developer", "content": 5}]}, "messages.0.content"),
        ({"messages": [{"role": "system", "content": 5}]}, "messages.0.content"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
        ({"messages": [{"role": "tool", "content": 5, "tool_call_id": "a"}]}, "messages.0.content"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
         "messages.0.content"),
        ({"messages": [{"role": "assistant", "content": 5}]}, "messages.0.content"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.tool_call_id"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages.0"),
        ({"messages": []}, "messages"),
        ({"stream_options": {"include_usage": "x"}}, "stream_options.include_usage"),
        ({"tools": [{"type": "function", "function": {"name": 5}}]}, "tools.0.function.name"),
        ({"temperature": 2.5}, "temperature"),
        ({"logit_bias": {"7" * 200: 500}}, ("logit_bias." + "7" * 200)[:128]),
    ],
)  # fmt: skip
def test_a_refused_field_is_named_by_the_request_s_own_path(
    request_fields: dict[str, object], param: str
) -> None:
    """The parameter names request fields and indexes only: never the role a message
    was tried as, nor a union member pydantic tried (`literal[...]`, `str`...)."""
    body = json.dumps({**GOOD, **request_fields}).encode()
    assert _refusal(body) == (400, "invalid_request", param)


MESSAGE_OK = b'{"role": "user", "content": "ok"}'
SURROGATE_MESSAGE = b'{"role": "user", "content": "\\ud800"}'


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"model": "t", "messages": [' + MESSAGE_OK + b", " + SURROGATE_MESSAGE + b"]}",
         "messages.1"),
        (b'{"model": "\\uD800", "messages": [' + MESSAGE_OK + b"]}", "model"),
        (b'{"model": "t", "messages": [{"role": "user", "content": [{"type": "text", '
         b'"text": "\\udc00"}]}]}', "messages.0"),
        (b'{"model": "t", "messages": [' + MESSAGE_OK + b'], "tools": [{"type": "function", '
         b'"function": {"name": "a"}}, {"type": "function", "function": {"name": "b", '
         b'"description": "\\uDFFF"}}]}', "tools.1"),
        (b'{"model": "t", "messages": [' + MESSAGE_OK + b'], "stop": ["a", "\\udbff"]}', "stop"),
        (b'{"\\ud800": 1, "model": "t", "messages": [' + MESSAGE_OK + b"]}", None),
        (b'{"extra": {"k\\ud800": 1}, "model": "t", "messages": [' + MESSAGE_OK + b"]}", None),
    ],
)  # fmt: skip
def test_a_lone_surrogate_is_refused_where_it_is(body: bytes, param: str | None) -> None:
    """Found at the edge and named by request fields only (never a key the client chose)."""
    assert _refusal(body) == (400, "invalid_request", param)


def test_a_surrogate_pair_is_a_character() -> None:
    pair = b'{"role": "user", "content": "\\ud83d\\ude00\\uD83D\\uDE00"}'
    body = b'{"model": "t", "messages": [' + pair + b"]}"
    assert parse_body(body).messages[0].content == "\U0001f600" * 2


MAX_CONTAINERS = 65_536
MAX_COMMAS = 1_048_576
"""docs/worker-limits.md's raw-byte caps, written out so the code is held to them."""


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"[" * MAX_CONTAINERS, "invalid_json"),
        (b"[" * (MAX_CONTAINERS + 1), "request_too_complex"),
        (b"{" * (MAX_CONTAINERS // 2) + b"[" * (MAX_CONTAINERS // 2 + 1), "request_too_complex"),
        (b"[" * (MAX_CONTAINERS // 2) + b"{" * (MAX_CONTAINERS // 2 + 1), "request_too_complex"),
        (b"," * MAX_COMMAS, "invalid_json"),
        (b"," * (MAX_COMMAS + 1), "request_too_complex"),
    ],
)
def test_the_value_count_bounds_are_counted_before_parsing(body: bytes, code: str) -> None:
    assert _refusal(body) == (400, code, None)
