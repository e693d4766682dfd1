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
