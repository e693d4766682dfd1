"""The chat endpoint's edge, in process: framing, the body read, shutdown, the queue.

Each refusal is answered before generation with its status and code, closes the
connection when the body was not read to its end, leaves exactly one record, and gives
back its queue slot (the `endpoint` fixture checks the slot at teardown). Over HTTP
the same answers are tested in test_api_errors (integration); here each check runs in
the unit suite, where the mutation run sees it.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

import pytest
import structlog

from guest.worker import app as app_module
from guest.worker.app import ApiConfig, ChatEndpoint
from guest.worker.server import ConnectionLimits
from guest.worker.toolprep import PreparedTools, ToolRequest, ToolsRefused
from receipts import strictjson
from tests.guest.worker.asgi import (
    Client,
    Exchange,
    Message,
    body_of,
    client_for,
    on_nth,
    parts,
    post,
    unexpected,
)
from tests.guest.worker.conftest import (
    ENGINE_FLOOR_BYTES,
    ENGINE_GUARD_BYTES,
    MODEL_ID,
    READ_TOOL,
)
from tests.guest.worker.test_chat_answers import LONG, record

GOOD: dict[str, Any] = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 2,
    "seed": 1,
}
GOOD_BODY = body_of(GOOD)
Endpoint = Callable[..., ChatEndpoint]


def assert_refused_before_generation(
    chat: ChatEndpoint, answer: Exchange, expected: tuple[int, str, str | None], close: bool
) -> None:
    """The answer, the connection header, and the request's one record."""
    assert answer.error() == expected
    assert (answer.headers.get(b"connection") == b"close") is close
    rec = record(chat)
    status, code, _ = expected
    assert (rec["http_status"], rec["error_code"]) == (status, code)
    assert rec["admission"] == "not_evaluated"
    assert rec["stream"] is False
    assert (rec["prompt_tokens"], rec["completion_tokens"]) == (0, 0)
    assert (rec["floor_bytes"], rec["guard_bytes"]) == (ENGINE_FLOOR_BYTES, ENGINE_GUARD_BYTES)


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for *condition*, failing after *timeout* seconds (never hanging the suite)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the endpoint never reached the state waited for"
        await asyncio.sleep(0.01)


def headers(*pairs: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), *pairs]


CL = b"content-length"
DOCUMENTED_BODY_LIMIT = 8 * 1024 * 1024
"""docs/worker-limits.md: the body size limit is 8 MiB (written out here, not imported,
so the test holds the code to the documented number)."""
FRAMING_REFUSALS = [
    ("no length", headers(), (400, "content_length_required")),
    ("chunked", headers((CL, str(len(GOOD_BODY)).encode()), (b"transfer-encoding", b"chunked")),
     (400, "content_length_required")),
    ("two lengths", headers((CL, b"5"), (CL, b"6")), (400, "invalid_content_length")),
    ("signed", headers((CL, b"+5")), (400, "invalid_content_length")),
    ("negative", headers((CL, b"-5")), (400, "invalid_content_length")),
    ("not decimal", headers((CL, b"5a")), (400, "invalid_content_length")),
    ("empty", headers((CL, b"")), (400, "invalid_content_length")),
    ("19 digits", headers((CL, b"0" * 16 + b"100")), (400, "invalid_content_length")),
    ("over the cap", headers((CL, str(DOCUMENTED_BODY_LIMIT + 1).encode())),
     (413, "body_too_large")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("request_headers", "expected"),
    [case[1:] for case in FRAMING_REFUSALS],
    ids=[case[0] for case in FRAMING_REFUSALS],
)
async def test_framing_is_refused_before_a_byte_is_read(
    endpoint: Endpoint, request_headers: list[tuple[bytes, bytes]], expected: tuple[int, str]
) -> None:
    chat = endpoint()
    request_scope, client = client_for(GOOD_BODY, headers=request_headers)
    await chat(request_scope, client.receive, client.send)
    assert len(client.messages) == 1, "the body was read"
    assert_refused_before_generation(chat, client.exchange, (*expected, None), close=True)
    assert record(chat)["outcome"] == "rejected_invalid_request"


@pytest.mark.parametrize(
    "length",
    [
        pytest.param(lambda n: [str(n).encode()] * 2, id="the same length twice"),
        pytest.param(lambda n: [str(n).encode().rjust(18, b"0")], id="18 digits"),
        pytest.param(lambda n: [str(DOCUMENTED_BODY_LIMIT).encode()], id="exactly the cap"),
    ],
)
async def test_framing_at_its_limits_is_accepted(
    endpoint: Endpoint, length: Callable[[int], list[bytes]]
) -> None:
    """A body shorter than its declared length is what it is (the server frames the
    connection); here it shows the length itself was let through."""
    chat = endpoint()
    answer = await post(
        chat, GOOD_BODY, headers=headers(*((CL, v) for v in length(len(GOOD_BODY))))
    )
    assert answer.status == 200, answer.body
    assert record(chat)["outcome"] in ("stop", "length")


async def test_a_body_longer_than_its_length_is_refused(endpoint: Endpoint) -> None:
    chat = endpoint()
    short = str(len(GOOD_BODY) - 1).encode()
    answer = await post(chat, GOOD_BODY, headers=headers((CL, short)), messages=parts(GOOD_BODY, 5))
    assert_refused_before_generation(chat, answer, (413, "body_too_large", None), close=True)


async def test_a_body_in_pieces_is_joined_in_order(endpoint: Endpoint) -> None:
    chat = endpoint()
    pieces = parts(GOOD_BODY, 1, 10, 10, len(GOOD_BODY) - 1)
    del pieces[0]["body"]  # a message may leave `body` out: no bytes
    pieces[0]["more_body"] = True
    pieces.insert(0, {"type": "http.request", "body": GOOD_BODY[:1], "more_body": True})
    del pieces[-1]["more_body"]  # `more_body` left out: the body ends
    answer = await post(chat, GOOD_BODY, messages=pieces)
    assert answer.status == 200, answer.body
    assert answer.json()["model"] == MODEL_ID


async def test_a_stalled_body_times_out(endpoint: Endpoint) -> None:
    chat = endpoint(body_timeout_s=0.3)
    began = time.monotonic()
    answer = await post(chat, GOOD_BODY, messages=parts(GOOD_BODY, 7)[:1])
    waited_ms = (time.monotonic() - began) * 1000
    assert_refused_before_generation(chat, answer, (408, "request_timeout", None), close=True)
    assert 300 <= record(chat)["duration_ms"] <= waited_ms


async def test_a_client_gone_before_its_body_ends(endpoint: Endpoint) -> None:
    chat = endpoint()
    request_scope, client = client_for(GOOD_BODY, messages=parts(GOOD_BODY, 7)[:1])
    client.leave()
    await chat(request_scope, client.receive, client.send)
    expected = (400, "client_disconnected", None)
    assert_refused_before_generation(chat, client.exchange, expected, close=True)


async def test_after_shutdown_every_request_is_refused(endpoint: Endpoint) -> None:
    chat = endpoint()
    assert (await post(chat, GOOD_BODY)).status == 200
    chat.shutdown()
    answer = await post(chat, GOOD_BODY)
    assert_refused_before_generation(chat, answer, (503, "shutting_down", None), close=True)
    assert record(chat)["outcome"] == "cancelled_shutdown"
    assert [r.index for r in chat.records.snapshot()] == [0, 1]


@pytest.mark.parametrize("depth", [0, 1])
async def test_the_queue_holds_one_running_and_depth_waiting(
    endpoint: Endpoint, depth: int
) -> None:
    """Slots are taken before the body is read: requests still sending their bodies hold
    them, the next one is 429, and every slot comes back when its request ends."""
    chat = endpoint(queue_depth=depth)
    held: list[tuple[Client, asyncio.Task[None]]] = []
    for _ in range(depth + 1):
        request_scope, client = client_for(GOOD_BODY, messages=parts(GOOD_BODY, 4)[:1])
        held.append(
            (client, asyncio.ensure_future(chat(request_scope, client.receive, client.send)))
        )
    await until(lambda: chat.pending == depth + 1)
    refused = await post(chat, GOOD_BODY)
    assert_refused_before_generation(chat, refused, (429, "queue_full", None), close=True)
    assert record(chat)["outcome"] == "refused_queue_full"
    for client, task in held:
        client.feed(parts(GOOD_BODY, 4)[1:])
        await task
        assert client.exchange.status == 200, client.exchange.body
    assert chat.pending == 0
    assert (await post(chat, GOOD_BODY)).status == 200


async def test_a_refused_request_gives_its_slot_back(endpoint: Endpoint) -> None:
    chat = endpoint(queue_depth=0)
    for bad in (b"{not json", body_of({**GOOD, "model": "other"}), GOOD_BODY):
        await post(chat, bad)
        assert chat.pending == 0
    assert [r.to_json()["http_status"] for r in chat.records.snapshot()] == [400, 404, 200]


async def test_a_cancelled_request_is_recorded_and_gives_its_slot_back(
    endpoint: Endpoint,
) -> None:
    chat = endpoint(queue_depth=0)
    request_scope, client = client_for(GOOD_BODY, messages=parts(GOOD_BODY, 4)[:1])
    task = asyncio.ensure_future(chat(request_scope, client.receive, client.send))
    await until(lambda: chat.pending == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert chat.pending == 0
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["error_code"]) == (
        "cancelled_shutdown", 503, "shutting_down"
    )  # fmt: skip
    assert client.exchange.sent == []
    assert rec["stream"] is False


async def test_body_errors_are_named_with_their_parameter(endpoint: Endpoint) -> None:
    chat = endpoint()
    cases: list[tuple[bytes, tuple[int, str, str | None]]] = [
        (b'{"model": "tiny", "model": "tiny"}', (400, "duplicate_key", "model")),
        (body_of({**GOOD, "model": "other"}), (404, "model_not_found", "model")),
        (body_of({**GOOD, "temperature": 3}), (400, "invalid_request", "temperature")),
        (b"[" * 65_537, (400, "request_too_complex", None)),
    ]
    for raw, expected in cases:
        answer = await post(chat, raw)
        assert_refused_before_generation(chat, answer, expected, close=False)
        assert record(chat)["outcome"] == "rejected_invalid_request"


async def test_tool_refusals_keep_their_status(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema the worker cannot compile is the client's 400; a constraint backend that
    cannot be built is the worker's 500, recorded as an error."""
    chat = endpoint()
    unsupported = {**READ_TOOL, "function": {**READ_TOOL["function"], "parameters": {
        "type": "object", "properties": {"p": {"type": "string", "pattern": "^a+$"}}}}}  # fmt: skip
    answer = await post(chat, {**GOOD, "tools": [unsupported], "stream": True})
    assert answer.error() == (400, "unsupported_tool_schema", "tools.parameters.pattern")
    rec = record(chat)
    assert (rec["outcome"], rec["stream"]) == ("rejected_invalid_request", True)

    def unavailable(request: ToolRequest) -> PreparedTools:
        raise ToolsRefused("constraint_unavailable", None)

    monkeypatch.setattr(chat.tools, "prepare", unavailable)
    answer = await post(chat, {**GOOD, "tools": [READ_TOOL]})
    assert answer.error() == (500, "constraint_unavailable", None)
    assert b"connection" not in answer.headers
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["stream"]) == ("error", 500, False)


async def test_an_exception_while_preparing_is_a_recorded_json_500(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = endpoint()
    monkeypatch.setattr(chat.tools, "prepare", unexpected)
    answer = await post(chat, GOOD_BODY)
    assert answer.error() == (500, "internal_error", None)
    assert answer.headers[b"connection"] == b"close"
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["error_code"]) == (
        "error", 500, "internal_error"
    )  # fmt: skip
    assert len(chat.records.snapshot()) == 1


async def test_an_exception_in_generation_is_a_recorded_500(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = endpoint()
    monkeypatch.setattr(chat.engine, "run", unexpected)
    for stream in (False, True):
        answer = await post(chat, {**GOOD, "stream": stream})
        assert answer.error() == (500, "internal_error", None)
        rec = record(chat)
        assert (rec["outcome"], rec["error_code"], rec["stream"]) == (
            "error", "internal_error", stream
        )  # fmt: skip
    assert len(chat.records.snapshot()) == 2


async def test_an_exception_after_the_answer_started_sends_nothing_more(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure once the SSE headers went out cannot become a JSON 500 (the status is
    already 200): the record says what happened, and nothing else is sent."""
    chat = endpoint()
    original = chat._usage
    monkeypatch.setattr(chat, "_usage", lambda result: 1 // 0 or original(result))
    request_scope, client = client_for({**GOOD, "stream": True,
                                        "stream_options": {"include_usage": True}})  # fmt: skip
    await chat(request_scope, client.receive, client.send)
    assert client.exchange.status == 200
    assert client.exchange.sent[-1]["more_body"] is True
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["stream"]) == ("error", 500, True)
    assert len(chat.records.snapshot()) == 1


def test_the_collector_is_off_only_while_a_body_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    real = strictjson.loads_strict

    def watched(raw: bytes) -> Any:
        seen.append(gc.isenabled())
        return real(raw)

    monkeypatch.setattr(app_module, "loads_strict", watched)
    assert gc.isenabled()
    app_module.parse_body(GOOD_BODY)
    with pytest.raises(app_module.Rejected):
        app_module.parse_body(b"{bad")
    assert seen == [False, False]
    assert gc.isenabled()
    gc.disable()
    try:
        app_module.parse_body(GOOD_BODY)
        assert not gc.isenabled(), "parsing turned on a collector its caller had off"
    finally:
        gc.enable()


async def test_shutdown_cancels_the_running_and_the_queued_request(endpoint: Endpoint) -> None:
    """Both end at once as `cancelled_shutdown`: the one generating through the abort
    callback, the one waiting for the generation thread before it starts."""
    chat = endpoint(queue_depth=1)
    running = asyncio.ensure_future(post(chat, LONG))
    await until(lambda: len(chat.jobs) == 1)
    queued = asyncio.ensure_future(post(chat, LONG))
    await until(lambda: len(chat.jobs) == 2)
    began = time.monotonic()
    chat.shutdown()
    answers = await asyncio.gather(running, queued)
    assert time.monotonic() - began < 2
    assert [a.error() for a in answers] == [(503, "shutting_down", None)] * 2
    outcomes = sorted(
        (r.to_json()["index"], r.to_json()["outcome"]) for r in chat.records.snapshot()
    )
    assert outcomes == [(0, "cancelled_shutdown"), (1, "cancelled_shutdown")]
    assert not chat.jobs


async def test_each_request_logs_one_line_matching_its_record(endpoint: Endpoint) -> None:
    chat = endpoint()
    with structlog.testing.capture_logs() as logs:
        await post(chat, GOOD_BODY)
        await post(chat, b"{bad")
    lines = [line for line in logs if line["event"] == "worker.request"]
    expected = [
        {"index": r["index"], "outcome": r["outcome"], "status": r["http_status"],
         "prompt_tokens": r["prompt_tokens"], "completion_tokens": r["completion_tokens"],
         "duration_ms": r["duration_ms"]}
        for r in (rec.to_json() for rec in chat.records.snapshot())
    ]  # fmt: skip
    assert [{k: v for k, v in line.items() if k in expected[0]} for line in lines] == expected
    assert [line["log_level"] for line in lines] == ["info", "info"]


async def test_a_record_s_duration_is_from_arrival_to_its_answer(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint's clock jumps 100 s while the answer is sent: the record, written
    once the answer is out, says so (in milliseconds). Only the endpoint's clock jumps;
    the engine's deadline runs on the real one."""
    chat = endpoint()
    jump = 0.0

    class Clock:
        monotonic = staticmethod(lambda: time.monotonic() + jump)
        time = staticmethod(time.time)

    monkeypatch.setattr(app_module, "time", Clock)
    request_scope, client = client_for(GOOD_BODY)

    async def jump_on_answer(message: Message) -> None:
        nonlocal jump
        if message["type"] == "http.response.start":
            jump = 100.0

    client.on_send = jump_on_answer
    began = time.monotonic()
    await chat(request_scope, client.receive, client.send)
    took_ms = (time.monotonic() - began) * 1000
    assert client.exchange.status == 200
    assert 100_000 <= record(chat)["duration_ms"] <= 100_000 + took_ms


def test_the_endpoint_and_the_server_share_one_body_timeout() -> None:
    """docs/worker-limits.md gives one body timeout (30 s): the server's connection
    guard and the endpoint's body read default to the same number."""
    assert ApiConfig.body_timeout_s == ConnectionLimits.body_timeout_s == 30.0


async def test_bodies_are_prepared_one_at_a_time(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One `worker-prep` thread: parsing and tool compilation never take a second core
    from generation, however many requests arrive together."""
    chat = endpoint()
    real = chat.tools.prepare
    running = peak = 0

    def watched(request: ToolRequest) -> PreparedTools:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        time.sleep(0.05)
        running -= 1
        return real(request)

    monkeypatch.setattr(chat.tools, "prepare", watched)
    answers = await asyncio.gather(*(post(chat, GOOD_BODY) for _ in range(3)))
    assert [a.status for a in answers] == [200] * 3
    assert peak == 1


async def test_one_generation_at_a_time(endpoint: Endpoint) -> None:
    """One llama.cpp context, one generation thread: a request admitted while another
    generates waits until that one ends (here, its client leaves)."""
    chat = endpoint()
    first_scope, first = client_for(LONG)
    running = asyncio.ensure_future(chat(first_scope, first.receive, first.send))
    await until(lambda: len(chat.jobs) == 1)
    waiting = asyncio.ensure_future(post(chat, GOOD_BODY))
    await until(lambda: len(chat.jobs) == 2)
    await asyncio.sleep(0.5)
    assert not waiting.done(), "a second generation ran beside the first"
    first.leave()
    await running
    assert (await waiting).status == 200
    assert first.exchange.error() == (499, "client_disconnected", None)


async def test_a_body_of_exactly_the_limit_is_read(endpoint: Endpoint) -> None:
    chat = endpoint()
    answer = await post(chat, b" " * DOCUMENTED_BODY_LIMIT)
    assert answer.error() == (400, "invalid_json", None)


@pytest.mark.parametrize("failing", ["http.response.start", "http.response.body"])
async def test_a_failed_send_of_the_answer_sends_nothing_more(
    endpoint: Endpoint, failing: str
) -> None:
    """Once the status line was handed to the server (even if that send failed), no
    second status line follows (the ASGI server would refuse it), and the request keeps
    its one record."""
    chat = endpoint()
    request_scope, client = client_for(GOOD_BODY)
    client.on_send = on_nth(1, lambda m: m["type"] == failing, unexpected)
    await chat(request_scope, client.receive, client.send)
    sent = [m["type"] for m in client.exchange.sent]
    assert sent == ([] if failing == "http.response.start" else ["http.response.start"])
    assert len(chat.records.snapshot()) == 1


async def test_a_refusal_whose_send_fails_keeps_its_record(endpoint: Endpoint) -> None:
    chat = endpoint()
    request_scope, client = client_for(b"{bad")
    client.on_send = on_nth(1, lambda m: True, unexpected)
    await chat(request_scope, client.receive, client.send)
    rec = record(chat)
    assert (rec["outcome"], rec["error_code"]) == ("rejected_invalid_request", "invalid_json")
    assert len(chat.records.snapshot()) == 1
