"""The `openai` SDK, unchanged, completes a tool-calling exchange with the worker."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx2
import jsonschema
import openai
import pytest

from tests.guest.worker.conftest import MODEL_ID, READ_TOOL, Worker


@pytest.mark.integration
def test_sdk_tool_calling_exchange_over_loopback(shared_worker: Worker) -> None:
    assert shared_worker.port is not None
    client = openai.OpenAI(
        api_key="unused", base_url=f"http://127.0.0.1:{shared_worker.port}/v1", max_retries=0
    )
    assert [m.id for m in client.models.list()] == [MODEL_ID]
    messages: list[dict[str, object]] = [{"role": "user", "content": "Read src/app.py"}]
    first = client.chat.completions.create(
        model=MODEL_ID,
        messages=cast(Any, messages),
        tools=cast(Any, [READ_TOOL]),
        tool_choice="required",
        temperature=0.8,
        seed=7,
        max_tokens=120,
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.function.name == "read"
    jsonschema.validate(json.loads(call.function.arguments), READ_TOOL["function"]["parameters"])
    assert first.usage is not None
    assert first.usage.completion_tokens > 0
    # the SDK's own message object goes back as history, then the tool result
    followup = client.chat.completions.create(
        model=MODEL_ID,
        messages=cast(
            Any,
            [
                *messages,
                choice.message,
                {"role": "tool", "tool_call_id": call.id, "content": "print('hi')"},
            ],
        ),
        tools=cast(Any, [READ_TOOL]),
        tool_choice="none",
        seed=7,
        max_tokens=16,
    )
    assert followup.choices[0].finish_reason in ("stop", "length")
    assert isinstance(followup.choices[0].message.content, str)
    assert followup.choices[0].message.tool_calls is None
    # the model_dump()'d form (refusal, annotations, audio, function_call = None) too
    dumped = client.chat.completions.create(
        model=MODEL_ID,
        messages=cast(
            Any,
            [*messages, choice.message.model_dump(),
             {"role": "tool", "tool_call_id": call.id, "content": "ok"}],
        ),
        max_tokens=4,
    )  # fmt: skip
    assert dumped.usage is not None
    assert dumped.usage.completion_tokens <= 4


@pytest.mark.integration
def test_sdk_streaming_tool_call_and_usage(shared_worker: Worker) -> None:
    client = openai.OpenAI(
        api_key="unused",
        base_url="http://worker/v1",
        http_client=openai.DefaultHttpxClient(
            transport=httpx2.HTTPTransport(uds=str(shared_worker.socket))
        ),
        max_retries=0,
    )
    stream = client.chat.completions.create(
        model=MODEL_ID,
        messages=[{"role": "user", "content": "Read a file"}],
        tools=cast(Any, [READ_TOOL]),
        tool_choice={"type": "function", "function": {"name": "read"}},
        seed=3,
        max_tokens=120,
        stream=True,
        stream_options={"include_usage": True},
    )
    finish, arguments, usage, ids = None, "", None, set()
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            ids.add(chunk.id)
            finish = c.finish_reason or finish
            for tc in c.delta.tool_calls or []:
                arguments += tc.function.arguments or "" if tc.function else ""
    assert finish == "tool_calls"
    jsonschema.validate(json.loads(arguments), READ_TOOL["function"]["parameters"])
    assert usage is not None
    assert usage.completion_tokens > 0
    assert len(ids) == 1
    record = shared_worker.records()[-1]
    assert record["stream"] is True
    assert record["completion_tokens"] == usage.completion_tokens
    assert record["prompt_tokens"] == usage.prompt_tokens
