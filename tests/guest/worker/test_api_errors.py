"""Every class of bad input gets its status and stable code, and the worker keeps serving.

Framing errors are sent over a raw Unix socket (no client library would send them);
after each one, a fresh connection must get a normal answer.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.guest.worker.conftest import MODEL_ID, READ_TOOL, Worker

GOOD: dict[str, Any] = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 4,
    "seed": 1,
}


def raw_request(worker: Worker, data: bytes, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    """Send raw bytes; return (status, JSON body) of the response."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(worker.socket))
        s.sendall(data)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = s.recv(65536)
            assert chunk, "connection closed before a response"
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            chunk = s.recv(65536)
            assert chunk
            body += chunk
    return status, json.loads(body[:length])


def post_head(content_length: bytes | None, extra: bytes = b"") -> bytes:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: w\r\nContent-Type: application/json\r\n"
    if content_length is not None:
        head += b"Content-Length: " + content_length + b"\r\n"
    return head + extra + b"\r\n"


def assert_healthy(worker: Worker) -> None:
    with worker.client() as c:
        assert c.get("/health").status_code == 200
        r = c.post("/v1/chat/completions", json=GOOD)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] >= 1


def error_of(status: int, body: dict[str, Any]) -> tuple[int, str, str | None]:
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return status, error["code"], error["param"]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (post_head(b"9000000"), (413, "body_too_large")),
        (post_head(None), (400, "content_length_required")),
        (post_head(None, b"Transfer-Encoding: chunked\r\n") + b"0\r\n\r\n",
         (400, "content_length_required")),
        (post_head(b"-5"), (400, "invalid_content_length")),
        (post_head(b"abc"), (400, "invalid_content_length")),
        (post_head(b"12, 13"), (400, "invalid_content_length")),
    ],
)  # fmt: skip
def test_framing_errors(shared_worker: Worker, data: bytes, expected: tuple[int, str]) -> None:
    """Bytes h11 cannot frame never reach the app: the refused connection is counted."""
    before = shared_worker.refusals().unframed
    status, body = raw_request(shared_worker, data)
    assert error_of(status, body)[:2] == expected
    assert_healthy(shared_worker)
    unframed = expected[1] == "invalid_content_length"  # the app answers the others
    assert shared_worker.refusals().unframed == before + unframed


def _body(obj: Any) -> bytes:
    return json.dumps(obj).encode()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", (400, "invalid_json", None)),
        (b"\xff\xfe", (400, "invalid_json", None)),
        (b'{"model": "tiny", "model": "tiny", "messages": []}', (400, "duplicate_key", "model")),
        (b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
         (400, "non_finite_number", None)),
        (b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": 1e999}',
         (400, "non_finite_number", None)),
        (b"[1, 2]", (400, "invalid_request", None)),
        (_body({**GOOD, "temperature": "1"}), (400, "invalid_request", "temperature")),
        (_body({**GOOD, "temperature": 3}), (400, "invalid_request", "temperature")),
        (_body({**GOOD, "max_tokens": True}), (400, "invalid_request", "max_tokens")),
        (_body({**GOOD, "max_tokens": -1}), (400, "invalid_request", "max_tokens")),
        (_body({**GOOD, "stop": 5}), (400, "invalid_request", "stop")),
        (_body({**GOOD, "stop": ""}), (400, "invalid_request", "stop")),
        (_body({**GOOD, "stop": ["a", "b", "c", "d", "e"]}), (400, "invalid_request", "stop")),
        (_body({**GOOD, "stop": ["a", 3]}), (400, "invalid_request", "stop")),
        (_body({**GOOD, "stop": "x" * 257}), (400, "invalid_request", "stop")),
        (_body({**GOOD, "n": 2}), (400, "invalid_request", "n")),
        (_body({**GOOD, "messages": [{"role": "user"}]}),
         (400, "invalid_request", "messages.0.content")),
        (_body({**GOOD, "messages": [{"role": "wizard", "content": "x"}]}),
         (400, "invalid_request", "messages.0")),
        (_body({**GOOD, "messages": []}), (400, "invalid_request", "messages")),
        (_body({k: v for k, v in GOOD.items() if k != "model"}), (400, "invalid_request", "model")),
        (_body({**GOOD, "model": "gpt-4"}), (404, "model_not_found", "model")),
        (_body({**GOOD, "tool_choice": "required"}), (400, "invalid_request", "tool_choice")),
        (_body({**GOOD, "tools": [READ_TOOL, READ_TOOL]}), (400, "invalid_request", "tools")),
        (_body({**GOOD, "logit_bias": {"999999": 5}}), (400, "invalid_request", "logit_bias")),
        (_body({**GOOD, "max_tokens": 100000}), (400, "context_length_exceeded", "messages")),
        (_body({**GOOD, "tools": [{"type": "function", "function": {"name": "g", "parameters": {
            "type": "object", "properties": {"p": {"type": "string", "pattern": "^a+$"}}}}}]}),
         (400, "unsupported_tool_schema", "tools.parameters.pattern")),
        (_body({**GOOD, "tools": [{"type": "function", "function": {"name": "g", "parameters": {
            "type": "object", "properties": {"p": {"type": 12}}}}}]}),
         (400, "unsupported_tool_schema", "tools.0.function.parameters")),
    ],
)  # fmt: skip
def test_body_errors(
    shared_worker: Worker, body: bytes, expected: tuple[int, str, str | None]
) -> None:
    with shared_worker.client() as c:
        r = c.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert error_of(r.status_code, r.json()) == expected
    assert_healthy(shared_worker)


@pytest.mark.integration
def test_unknown_routes_and_methods_are_json(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        r = c.get("/v1/nothing")
        assert error_of(r.status_code, r.json())[:2] == (404, "not_found")
        r = c.get("/v1/chat/completions")
        assert error_of(r.status_code, r.json())[:2] == (405, "method_not_allowed")


@pytest.mark.integration
def test_rejections_are_recorded_as_closed_records(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        c.post(
            "/v1/chat/completions", content=b"{bad", headers={"content-type": "application/json"}
        )
    last = shared_worker.records()[-1]
    assert (last["outcome"], last["error_code"], last["http_status"]) == (
        "rejected_invalid_request",
        "invalid_json",
        400,
    )
    assert last["admission"] == "not_evaluated"


@pytest.mark.integration
def test_queue_full_answers_429(worker_factory: Callable[..., Worker]) -> None:
    worker = worker_factory("--queue-depth", "0", "--context", "8192")
    eos = "1021"
    long_request = {
        **GOOD,
        "max_tokens": 8000,
        "logit_bias": {eos: -100},
        "stream": True,
    }
    started = threading.Event()
    done = threading.Event()

    def occupy() -> None:
        with worker.client() as c, c.stream("POST", "/v1/chat/completions", json=long_request) as r:
            for _ in r.iter_lines():
                started.set()
        done.set()

    thread = threading.Thread(target=occupy)
    thread.start()
    assert started.wait(20)
    with worker.client() as c:
        r = c.post("/v1/chat/completions", json=GOOD)
    assert not done.is_set(), "the long request ended before the probe; the test saw nothing"
    assert error_of(r.status_code, r.json())[:2] == (429, "queue_full")
    thread.join(60)
    assert_healthy(worker)
    outcomes = [r["outcome"] for r in worker.records()]
    assert "refused_queue_full" in outcomes


@pytest.mark.integration
def test_raw_keepalive_connection_survives_a_body_error(shared_worker: Worker) -> None:
    """A JSON error on a well-framed request leaves the same connection usable."""
    with shared_worker.client() as c:
        r1 = c.post(
            "/v1/chat/completions", content=b"{bad", headers={"content-type": "application/json"}
        )
        r2 = c.post("/v1/chat/completions", json=GOOD)
    assert r1.status_code == 400
    assert r2.status_code == 200
    time.sleep(0)
