"""OpenAI conformance points real clients depend on (docs/worker.md, "Conformance").

Every stream ends with a `finish_reason`, then usage when asked, then `[DONE]`, even
one an error cut; non-final chunks carry `usage: null`; ids are random, so they never
repeat after a restart; `system_fingerprint` names the GGUF and the build; a tool-call
string that reached the grammar's cap is a closed error, never returned cut; and a
cancelled request leaves the KV cache's common prefix for the retry.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from guest.worker.app import _Sse
from guest.worker.engine import JobResult
from guest.worker.toolgrammar import text_units
from tests.guest.worker.asgi import sse_events
from tests.guest.worker.conftest import MODEL_ID, READ_TOOL, Gguf, Worker, start_worker
from tests.guest.worker.test_cancel import EOS, LONG_TEXT, request_bytes, wait_for_record

STRING_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "write",
        "parameters": {
            "type": "object",
            "properties": {"content": {"type": "string", "minLength": 4}},
            "required": ["content"],
            "additionalProperties": False,
        },
    },
}


def test_a_stream_cut_by_the_deadline_ends_with_finish_reason_usage_and_done(
    worker_factory: Callable[..., Worker],
) -> None:
    worker = worker_factory("--context", "32768", "--deadline-s", "1")
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 32000,
        "logit_bias": {EOS: -100},
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    events = sse_events(response.content)
    assert events[-1] == "[DONE]"
    usage, error, final = events[-2], events[-3], events[-4]
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] > 0
    assert error["error"]["code"] == "deadline_exceeded"
    assert final["choices"][0]["finish_reason"] == "length"
    chunks = [e for e in events if isinstance(e, dict) and "choices" in e]
    assert all(e["usage"] is None for e in chunks if e is not usage)
    assert all(e["choices"][0]["finish_reason"] is None for e in chunks[:-2])
    record = worker.records()[0]
    assert record["outcome"] == "cancelled_deadline"
    assert record["completion_tokens"] == usage["usage"]["completion_tokens"]


def test_a_normal_stream_has_null_usage_until_the_usage_chunk_and_a_fingerprint(
    worker_factory: Callable[..., Worker], tiny_gguf: Gguf
) -> None:
    worker = worker_factory()
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with worker.client() as c:
        events = sse_events(c.post("/v1/chat/completions", json=body).content)
        plain = c.post("/v1/chat/completions", json={**body, "stream": False}).json()
    chunks = [e for e in events if isinstance(e, dict)]
    assert [("usage" in e, e["usage"] is None) for e in chunks[:-1]] == [(True, True)] * (
        len(chunks) - 1
    )
    assert chunks[-1]["usage"]["completion_tokens"] == 6
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    fingerprint = f"fp_{tiny_gguf.sha256[:16]}_llama-cpp-python-"
    assert all(e["system_fingerprint"].startswith(fingerprint) for e in chunks)
    assert plain["system_fingerprint"] == chunks[0]["system_fingerprint"]


def test_ids_do_not_repeat_after_a_restart(tiny_gguf: Gguf, tmp_path: Path) -> None:
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Read a file"}],
        "tools": [READ_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "read"}},
        "max_tokens": 120,
        "seed": 3,
    }
    ids: list[str] = []
    for run in range(2):
        worker = start_worker(tiny_gguf, tmp_path / f"run{run}")
        try:
            with worker.client() as c:
                for _ in range(2):
                    answer = c.post("/v1/chat/completions", json=body).json()
                    assert answer["choices"][0]["finish_reason"] == "tool_calls", answer
                    ids.append(answer["id"])
                    ids += [call["id"] for call in answer["choices"][0]["message"]["tool_calls"]]
        finally:
            worker.stop()
    assert len(ids) == 8
    assert len(set(ids)) == 8, ids


def test_a_string_that_reached_the_grammar_cap_is_a_closed_error_not_a_cut_call(
    worker_factory: Callable[..., Worker],
) -> None:
    """Cap 4 and `minLength` 4: every string the grammar allows is at the cap."""
    worker = worker_factory("--max-string-chars", "4")
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Write a file"}],
        "tools": [STRING_TOOL],
        "tool_choice": "required",
        "max_tokens": 40,
        "seed": 1,
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
        streamed = c.post("/v1/chat/completions", json={**body, "stream": True})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "tool_argument_too_long"
    assert streamed.status_code == 502  # nothing was sent before the call was refused
    records = worker.records()
    assert [(r["outcome"], r["error_code"], r["cut"]) for r in records] == [
        ("invalid_model_output", "tool_argument_too_long", "tool_string_chars")
    ] * 2


ARRAY_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run",
        "parameters": {
            "type": "object",
            "properties": {"argv": {"type": "array", "items": {"type": "boolean"}, "minItems": 3}},
            "required": ["argv"],
            "additionalProperties": False,
        },
    },
}


def test_an_array_that_reached_the_grammar_cap_is_a_closed_error_not_a_cut_call(
    worker_factory: Callable[..., Worker],
) -> None:
    """Cap 3 and `minItems` 3: every array the grammar allows is at the cap, so every
    call may have been cut there; it is refused and its record names the cap."""
    worker = worker_factory("--max-array-items", "3")
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Run it"}],
        "tools": [ARRAY_TOOL],
        "tool_choice": "required",
        "max_tokens": 400,
        "seed": 1,
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 502, response.text
    assert response.json()["error"]["code"] == "tool_argument_too_many_items"
    [record] = worker.file_records()
    assert (record["outcome"], record["error_code"], record["cut"]) == (
        "invalid_model_output", "tool_argument_too_many_items", "tool_array_items"
    )  # fmt: skip


def test_an_array_below_the_grammar_cap_is_returned(
    worker_factory: Callable[..., Worker],
) -> None:
    """The same call under a cap of 8 and the schema's own `maxItems` 3: not a cut."""
    worker = worker_factory("--max-array-items", "8")
    tool = json.loads(json.dumps(ARRAY_TOOL))
    tool["function"]["parameters"]["properties"]["argv"]["maxItems"] = 3
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Run it"}],
        "tools": [tool],
        "tool_choice": "required",
        "max_tokens": 400,
        "seed": 1,
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    call = response.json()["choices"][0]["message"]["tool_calls"][0]
    assert len(json.loads(call["function"]["arguments"])["argv"]) == 3
    assert worker.file_records()[0]["cut"] is None


def test_a_text_answer_at_the_grammar_cap_finishes_length_and_names_the_cap(
    worker_factory: Callable[..., Worker],
) -> None:
    """Beside tools a text answer is capped by the grammar (`--max-text-chars`); one that
    reached the cap was cut, so it says `length`, not `stop`, and its record says which
    cap. The end-of-text token is biased away so the model cannot end on its own."""
    worker = worker_factory("--max-text-chars", "6")
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Say something"}],
        "tools": [READ_TOOL],
        "tool_choice": "none",
        "max_tokens": 200,
        "logit_bias": {EOS: -100},
        "seed": 2,
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert text_units(choice["message"]["content"]) == 6
    [record] = worker.file_records()
    assert (record["outcome"], record["cut"]) == ("length", "text_chars")
    assert record["completion_tokens"] < 200  # the grammar ended it, not max_tokens


def test_a_text_answer_cut_by_max_tokens_names_that_cap(
    worker_factory: Callable[..., Worker],
) -> None:
    worker = worker_factory()
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Say something"}],
        "max_tokens": 5,
        "logit_bias": {EOS: -100},
        "seed": 2,
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.json()["choices"][0]["finish_reason"] == "length"
    [record] = worker.file_records()
    assert (record["outcome"], record["cut"], record["completion_tokens"]) == (
        "length", "max_tokens", 5
    )  # fmt: skip


def test_a_string_at_the_schema_s_own_max_length_is_returned(
    worker_factory: Callable[..., Worker],
) -> None:
    """The client's `maxLength` below the worker's cap is the client's limit, not a cut."""
    worker = worker_factory("--max-string-chars", "8")
    tool = json.loads(json.dumps(STRING_TOOL))
    tool["function"]["parameters"]["properties"]["content"]["maxLength"] = 4
    body = {
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Write a file"}],
        "tools": [tool],
        "tool_choice": "required",
        "max_tokens": 40,
        "seed": 1,
    }
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    call = response.json()["choices"][0]["message"]["tool_calls"][0]
    assert len(json.loads(call["function"]["arguments"])["content"]) == 4


@pytest.mark.parametrize(
    ("code", "status", "finish"),
    [("invalid_model_output", 502, "error"), ("memory_pressure", 503, "error"),
     ("deadline_exceeded", 504, "length")],
)  # fmt: skip
def test_every_cut_stream_gets_a_finish_reason(code: Any, status: int, finish: str) -> None:
    """The closing sequence `_Sse.finish` sends after a started stream is cut."""
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        sse = _Sse(send, "chatcmpl-x", MODEL_ID, "fp_x")
        await sse.event({"content": "partial"}, None)
        result = JobResult("error", status, code, prompt_tokens=3, completion_tokens=2)
        await sse.finish(result, "call_x", {"prompt_tokens": 3, "completion_tokens": 2})

    asyncio.run(run())
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    assert events[-2]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2}
    assert events[-3]["error"]["code"] == code
    assert events[-4]["choices"][0]["finish_reason"] == finish


def test_a_cancelled_prefill_leaves_its_prefix_for_the_retry(
    worker_factory: Callable[..., Worker], tiny_gguf: Gguf, tmp_path: Path
) -> None:
    """A client that gives up mid-prompt and retries: the retry reuses what the
    cancelled request prefilled (before, a cancel cleared the whole cache and every
    retry started from zero), and answers exactly as a fresh worker does.

    The disconnect must land inside the prefill, whose length depends on the host's
    speed (well under 1 s quiet, several seconds under load): each attempt uses a new
    prompt (nothing cached) and halves the wait when the prefill had already finished,
    or lengthens it when not even one batch was done before the cancel."""
    worker = worker_factory("--context", "8192")
    wait_s = 0.5
    seen: list[tuple[float, str, int | None]] = []
    for attempt in range(8):
        body = {
            "model": MODEL_ID,
            "messages": [{"role": "user", "content": f"Attempt {attempt}. {LONG_TEXT}"}],
            "max_tokens": 8,
            "temperature": 0,
        }
        count = len(worker.file_records())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(worker.socket))
            s.sendall(request_bytes(body))
            time.sleep(wait_s)
            finished_first = len(worker.file_records()) > count
            s.shutdown(socket.SHUT_RDWR)
        cancelled, _seen = wait_for_record(worker, count + 1)
        if finished_first or cancelled["outcome"] != "cancelled_client":
            seen.append((wait_s, cancelled["outcome"], None))
            wait_s /= 2
            continue
        with worker.client() as c:
            retry = c.post("/v1/chat/completions", json=body)
        assert retry.status_code == 200
        record = worker.records()[count + 1]
        assert record["outcome"] == "length"
        seen.append((wait_s, cancelled["outcome"], record["cached_prompt_tokens"]))
        if record["cached_prompt_tokens"] < 512:  # cancelled before the first batch
            wait_s *= 1.5
            continue
        assert record["cached_prompt_tokens"] < record["prompt_tokens"] - 1, record
        break
    else:
        raise AssertionError(f"no retry reused a cancelled prefill (wait, outcome, cached): {seen}")
    fresh = start_worker(tiny_gguf, tmp_path / "fresh", "--context", "8192")
    try:
        with fresh.client() as c:
            expected = c.post("/v1/chat/completions", json=body)
        assert fresh.records()[0]["cached_prompt_tokens"] == 0
    finally:
        fresh.stop()
    assert retry.json()["choices"][0]["message"] == expected.json()["choices"][0]["message"]
