"""What the chat endpoint answers, in process on the real engine: the job it builds
from a request, the JSON completion, the SSE stream, and a client that leaves.

The same shapes are tested over HTTP against worker processes (test_conformance,
test_cancel, test_openai_sdk); these run in the unit suite, so the mutation run of
guest/worker/app sees every field.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx2
import llama_cpp
import pytest

from guest.worker.app import ChatEndpoint, Rejected, build_app, parse_body
from guest.worker.engine import Engine
from guest.worker.errors import error_body
from guest.worker.schema_grammar import Limits
from guest.worker.toolprep import PreparedTools, ToolRequest
from tests.guest.worker.asgi import Exchange, body_of, client_for, on_nth, post, unexpected
from tests.guest.worker.conftest import EDIT_TOOL, MODEL_ID, READ_TOOL, Gguf
from tests.guest.worker.test_cancel import EOS

GOOD: dict[str, Any] = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]}
LONG: dict[str, Any] = {**GOOD, "max_tokens": 30000, "logit_bias": {EOS: -100}}
"""Generation that would run for about ten seconds (end of text is forbidden)."""
NAMED_READ = {"type": "function", "function": {"name": "read"}}
Endpoint = Callable[..., ChatEndpoint]
HEX32 = "[0-9a-f]{32}"


def record(chat: ChatEndpoint, index: int = -1) -> dict[str, Any]:
    return chat.records.snapshot()[index].to_json()


def job_for(chat: ChatEndpoint, request: dict[str, Any], received: float = 100.0) -> Any:
    return chat._job(parse_body(body_of(request)), received)


# -- the job ---------------------------------------------------------------------


def test_the_job_carries_the_request_s_parameters(endpoint: Endpoint, tiny_engine: Engine) -> None:
    chat = endpoint(deadline_s=42.5, limits=Limits(max_string_chars=77))
    last = str(tiny_engine.vocab.n_vocab - 1)
    job = job_for(chat, {
        **GOOD, "max_tokens": 5, "max_completion_tokens": 3, "temperature": 0.25,
        "top_p": 0.5, "seed": 9, "stop": "x", "logit_bias": {last: 2.5, "0": -1},
    })  # fmt: skip
    assert (job.max_tokens, job.temperature, job.top_p, job.seed) == (3, 0.25, 0.5, 9)
    assert job.stop == ("x",)
    assert job.logit_bias == {int(last): 2.5, 0: -1.0}
    assert (job.received, job.deadline) == (100.0, 142.5)
    assert job.max_string_chars == 77
    assert job.messages == [{"role": "user", "content": "hi"}]
    assert (job.tools, job.grammars, job.validators) == (None, None, {})
    assert not job.cancel


def test_the_job_s_defaults(endpoint: Endpoint) -> None:
    chat = endpoint()
    job = job_for(chat, GOOD)
    assert (job.max_tokens, job.temperature, job.top_p, job.seed) == (None, 1.0, 1.0, None)
    assert (job.stop, job.logit_bias) == ((), {})
    assert job_for(chat, {**GOOD, "max_tokens": 5}).max_tokens == 5
    assert job_for(chat, {**GOOD, "temperature": 0, "top_p": 1}).temperature == 0.0


@pytest.mark.parametrize(
    ("request_fields", "expected"),
    [
        ({"model": "other"}, (404, "model_not_found", "model")),
        ({"tools": [READ_TOOL, READ_TOOL]}, (400, "invalid_request", "tools")),
        ({"tools": [READ_TOOL], "tool_choice": {"type": "function", "function": {"name": "edit"}}},
         (400, "invalid_request", "tool_choice")),
        ({"tool_choice": NAMED_READ}, (400, "invalid_request", "tool_choice")),
        ({"tool_choice": "required"}, (400, "invalid_request", "tool_choice")),
        ({"logit_bias": {"x1": 1}}, (400, "invalid_request", "logit_bias")),
        ({"logit_bias": {"1": 1, "-1": 1}}, (400, "invalid_request", "logit_bias")),
    ],
)  # fmt: skip
def test_the_job_refuses_what_the_model_cannot_serve(
    endpoint: Endpoint, request_fields: dict[str, Any], expected: tuple[int, str, str]
) -> None:
    with pytest.raises(Rejected) as info:
        job_for(endpoint(), {**GOOD, **request_fields})
    assert (info.value.status, info.value.code, info.value.param) == expected


def test_a_bias_is_refused_from_the_vocabulary_s_size_up(
    endpoint: Endpoint, tiny_engine: Engine
) -> None:
    chat = endpoint()
    size = tiny_engine.vocab.n_vocab
    assert job_for(chat, {**GOOD, "logit_bias": {str(size - 1): 1}}).logit_bias == {size - 1: 1.0}
    for token in (size, size + 1):
        with pytest.raises(Rejected) as info:
            job_for(chat, {**GOOD, "logit_bias": {str(token): 1}})
        assert info.value.param == "logit_bias"


@pytest.mark.parametrize(
    ("choice", "mode", "selected"),
    [
        (None, "auto", {"read", "edit"}),
        ("auto", "auto", {"read", "edit"}),
        ("none", "none", {"read", "edit"}),
        ("required", "required", {"read", "edit"}),
        ({"type": "function", "function": {"name": "edit"}}, "required", {"edit"}),
    ],
)
def test_tool_choice_decides_the_mode_and_the_tools_that_may_be_called(
    endpoint: Endpoint,
    monkeypatch: pytest.MonkeyPatch,
    choice: Any,
    mode: str,
    selected: set[str],
) -> None:
    chat = endpoint()
    seen: list[ToolRequest] = []
    real = chat.tools.prepare

    def watched(request: ToolRequest) -> PreparedTools:
        seen.append(request)
        return real(request)

    monkeypatch.setattr(chat.tools, "prepare", watched)
    fields: dict[str, Any] = {"tools": [READ_TOOL, EDIT_TOOL]}
    if choice is not None:
        fields["tool_choice"] = choice
    job = job_for(chat, {**GOOD, **fields})
    assert [(r.mode, set(r.selected)) for r in seen] == [(mode, selected)]
    assert [t.name for t in seen[0].tools] == ["read", "edit"]
    assert seen[0].tools[0].parameters == READ_TOOL["function"]["parameters"]
    assert job.tools == [READ_TOOL, EDIT_TOOL]
    assert job.grammars is not None
    assert set(job.validators) == selected


@pytest.mark.parametrize(
    ("fields", "mode"),
    [
        ({}, "required"),
        ({"tool_choice": "auto"}, "required"),
        ({"tool_choice": "none"}, "none"),
        ({"tool_choice": NAMED_READ}, "required"),
        ({"messages": [*GOOD["messages"], {"role": "assistant", "content": "Stop."}]}, "auto"),
    ],
)
def test_tools_required_serves_auto_as_required_unless_the_answer_is_prefilled(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], mode: str
) -> None:
    """The worker's `model_tool_required` for a client that asks `auto` (an agent CLI):
    `auto` and no choice become `required`; `none` and a named tool are kept; a request
    whose last message is the assistant's (OpenCode's last step prefills one) keeps
    `auto`, so the run can end in text. Mutation control: without the prefill test the
    last case is `required`; without the policy the first two are `auto`."""
    chat = endpoint(tools_required=True)
    seen: list[ToolRequest] = []
    real = chat.tools.prepare

    def watched(request: ToolRequest) -> PreparedTools:
        seen.append(request)
        return real(request)

    monkeypatch.setattr(chat.tools, "prepare", watched)
    job_for(chat, {**GOOD, "tools": [READ_TOOL, EDIT_TOOL], **fields})
    assert [r.mode for r in seen] == [mode]
    assert job_for(chat, GOOD).tools is None  # no tools offered: nothing to require


# -- the JSON answer ---------------------------------------------------------------


async def test_a_text_answer_has_every_field(endpoint: Endpoint, tiny_gguf: Gguf) -> None:
    chat = endpoint()
    before = int(time.time())
    answer = await post(chat, {**GOOD, "max_tokens": 3, "logit_bias": {EOS: -100}, "seed": 1})
    after = int(time.time())
    assert answer.status == 200
    assert b"connection" not in answer.headers
    body = answer.json()
    assert re.fullmatch("chatcmpl-" + HEX32, body["id"])
    assert (body["object"], body["model"]) == ("chat.completion", MODEL_ID)
    assert before <= body["created"] <= after
    assert body["system_fingerprint"] == (
        f"fp_{tiny_gguf.sha256[:16]}_llama-cpp-python-{llama_cpp.__version__}"
    )
    [choice] = body["choices"]
    assert (choice["index"], choice["finish_reason"], choice["logprobs"]) == (0, "length", None)
    message = choice["message"]
    assert set(message) == {"role", "content", "refusal"}
    assert (message["role"], message["refusal"]) == ("assistant", None)
    assert isinstance(message["content"], str)
    usage = body["usage"]
    assert usage["completion_tokens"] == 3
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + 3
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["stream"]) == ("length", 200, False)
    assert (rec["prompt_tokens"], rec["completion_tokens"]) == (usage["prompt_tokens"], 3)
    assert rec["admission"] == "admitted"
    assert (await post(chat, GOOD)).json()["id"] != body["id"]


async def test_a_tool_call_answer(endpoint: Endpoint) -> None:
    chat = endpoint()
    request = {
        **GOOD,
        "tools": [READ_TOOL],
        "tool_choice": NAMED_READ,
        "max_tokens": 120,
        "seed": 3,
    }
    body = (await post(chat, request)).json()
    [choice] = body["choices"]
    assert choice["finish_reason"] == "tool_calls", body
    [call] = choice["message"]["tool_calls"]
    assert re.fullmatch("call_" + HEX32, call["id"])
    assert (call["type"], call["function"]["name"]) == ("function", "read")
    assert isinstance(json.loads(call["function"]["arguments"])["filePath"], str)
    assert record(chat)["outcome"] == "tool_calls"


async def test_an_engine_refusal_is_a_json_error(endpoint: Endpoint) -> None:
    """Refused by the engine, after parsing: a JSON error with its parameter, streamed
    or not (no stream had started), and the connection stays open."""
    chat = endpoint()
    for stream in (False, True):
        answer = await post(chat, {**GOOD, "max_tokens": 100000, "stream": stream})
        assert answer.error() == (400, "context_length_exceeded", "messages")
        assert b"connection" not in answer.headers
        rec = record(chat)
        assert (rec["http_status"], rec["error_code"], rec["stream"]) == (
            400, "context_length_exceeded", stream
        )  # fmt: skip


async def test_a_client_that_leaves_cancels_its_generation(endpoint: Endpoint) -> None:
    chat = endpoint()
    request_scope, client = client_for(LONG)
    client.leave()  # after its body: the endpoint sees it while the model runs
    began = time.monotonic()
    await chat(request_scope, client.receive, client.send)
    assert time.monotonic() - began < 5
    assert client.exchange.error() == (499, "client_disconnected", None)
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"]) == ("cancelled_client", 499)
    assert rec["completion_tokens"] < 30000


# -- the stream ---------------------------------------------------------------------


def chunks_of(answer: Exchange) -> tuple[list[dict[str, Any]], list[Any]]:
    events = answer.events()
    assert events[-1] == "[DONE]"
    return [e for e in events if isinstance(e, dict) and "choices" in e], events


@pytest.mark.parametrize("include_usage", [False, True])
async def test_a_text_stream_in_order(
    endpoint: Endpoint, tiny_gguf: Gguf, include_usage: bool
) -> None:
    chat = endpoint()
    request = {**GOOD, "max_tokens": 4, "logit_bias": {EOS: -100}, "stream": True,
               "stream_options": {"include_usage": include_usage}}  # fmt: skip
    before = int(time.time())
    answer = await post(chat, request)
    assert answer.status == 200
    assert answer.headers == {b"content-type": b"text/event-stream", b"cache-control": b"no-cache"}
    chunks, events = chunks_of(answer)
    assert len({c["id"] for c in chunks}) == 1
    assert re.fullmatch("chatcmpl-" + HEX32, chunks[0]["id"])
    assert {(c["object"], c["model"], c["created"]) for c in chunks} == {
        ("chat.completion.chunk", MODEL_ID, chunks[0]["created"])
    }
    assert before <= chunks[0]["created"] <= int(time.time())
    fingerprint = f"fp_{tiny_gguf.sha256[:16]}_llama-cpp-python-{llama_cpp.__version__}"
    assert {c["system_fingerprint"] for c in chunks} == {fingerprint}
    usage = chunks.pop() if include_usage else None
    assert len(chunks) + 1 + (usage is not None) == len(events)
    first, *texts, final = chunks
    assert first["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
         "logprobs": None}
    ]  # fmt: skip
    assert texts, "no text event"
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in texts)
    assert all(c["choices"][0]["finish_reason"] is None for c in [first, *texts])
    assert final["choices"][0]["delta"] == {}
    assert final["choices"][0]["finish_reason"] == "length"
    assert all(c["usage"] is None for c in chunks)
    rec = record(chat)
    assert (rec["outcome"], rec["stream"], rec["completion_tokens"]) == ("length", True, 4)
    if usage is not None:
        assert usage["choices"] == []
        assert usage["usage"] == {
            "prompt_tokens": rec["prompt_tokens"], "completion_tokens": 4,
            "total_tokens": rec["prompt_tokens"] + 4,
        }  # fmt: skip


async def test_a_tool_call_stream(endpoint: Endpoint) -> None:
    chat = endpoint()
    request = {**GOOD, "tools": [READ_TOOL], "tool_choice": NAMED_READ, "max_tokens": 120,
               "seed": 3, "stream": True}  # fmt: skip
    chunks, _ = chunks_of(await post(chat, request))
    call_event, final = chunks[-2], chunks[-1]
    [call] = call_event["choices"][0]["delta"]["tool_calls"]
    assert call["index"] == 0
    assert re.fullmatch("call_" + HEX32, call["id"])
    assert (call["type"], call["function"]["name"]) == ("function", "read")
    json.loads(call["function"]["arguments"])
    assert call_event["choices"][0]["finish_reason"] is None
    assert final["choices"][0]["finish_reason"] == "tool_calls"


async def test_a_stream_cut_by_its_deadline_ends_in_order(endpoint: Endpoint) -> None:
    chat = endpoint(deadline_s=0.5)
    answer = await post(chat, {**LONG, "stream": True, "stream_options": {"include_usage": True}})
    assert answer.status == 200
    events = answer.events()
    assert events[-1] == "[DONE]"
    usage, error, final = events[-2], events[-3], events[-4]
    assert usage["usage"]["completion_tokens"] > 0
    assert error == json.loads(error_body(504, "deadline_exceeded"))
    assert final["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "length",
                                   "logprobs": None}  # fmt: skip
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["stream"]) == ("cancelled_deadline", 504, True)


async def test_a_client_that_leaves_a_stream_cancels_it(endpoint: Endpoint) -> None:
    chat = endpoint()
    request_scope, client = client_for({**LONG, "stream": True})
    client.on_send = on_nth(4, lambda m: b'"content"' in m.get("body", b""), client.leave)
    await asyncio.wait_for(chat(request_scope, client.receive, client.send), 10)
    assert client.exchange.sent[-1]["more_body"] is True, "the stream was closed normally"
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"], rec["stream"]) == ("cancelled_client", 499, True)
    assert 0 < rec["completion_tokens"] < 30000


async def test_a_stream_whose_connection_fails_cancels_it(endpoint: Endpoint) -> None:
    chat = endpoint()
    request_scope, client = client_for({**LONG, "stream": True})

    def broken_pipe() -> None:
        raise BrokenPipeError

    client.on_send = on_nth(3, lambda m: m["type"] == "http.response.body", broken_pipe)
    await asyncio.wait_for(chat(request_scope, client.receive, client.send), 10)
    rec = record(chat)
    assert (rec["outcome"], rec["http_status"]) == ("cancelled_client", 499)
    assert 0 < rec["completion_tokens"] < 30000


# -- the other routes ---------------------------------------------------------------


async def test_the_small_routes(endpoint: Endpoint) -> None:
    chat = endpoint()
    transport = httpx2.ASGITransport(app=build_app(chat))
    async with httpx2.AsyncClient(transport=transport, base_url="http://w") as client:
        models = await client.get("/v1/models")
        health = await client.get("/health")
        await client.post("/v1/chat/completions", json={**GOOD, "max_tokens": 1})
        records = await client.get("/v1/harness/records")
        missing = await client.get("/nowhere")
        wrong = await client.get("/v1/chat/completions")
        chat.shutdown()
        closing = await client.get("/health")
    assert models.status_code == 200
    assert models.json() == {"object": "list", "data": [
        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "harness"}]}  # fmt: skip
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert records.content == chat.records.document()
    assert [r["index"] for r in records.json()["records"]] == [0]
    for response, status, code in (
        (missing, 404, "not_found"), (wrong, 405, "method_not_allowed"),
        (closing, 503, "shutting_down"),
    ):  # fmt: skip
        assert response.status_code == status
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == code


async def test_an_exception_in_a_small_route_is_a_json_500(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = endpoint()

    monkeypatch.setattr(chat.records, "document", unexpected)
    transport = httpx2.ASGITransport(app=build_app(chat), raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://w") as client:
        response = await client.get("/v1/harness/records")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == "internal_error"
