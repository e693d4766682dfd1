"""The `openai` SDK, unchanged, completes a tool-calling exchange with the worker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx2
import jsonschema
import openai
import pytest

from tests.guest.worker.conftest import MODEL_ID, READ_TOOL, Gguf, Worker, start_worker


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


NOTES_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a text file of the project and return its lines.",
            "parameters": {
                "type": "object",
                "properties": {
                    "filePath": {"type": "string", "description": "path", "maxLength": 64}
                },
                "required": ["filePath"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the project's tests.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]


@pytest.fixture
def smollm2_worker(smollm2_gguf: Gguf, tmp_path: Path) -> Iterator[Worker]:
    """SmolLM2 behind `harness worker serve`, the command a user runs."""
    worker = start_worker(
        smollm2_gguf, tmp_path / "smollm2", "--context", "4096", port=True, command="cli"
    )
    yield worker
    worker.stop()


@pytest.mark.integration
def test_sdk_multi_turn_tool_round_trip_with_smollm2(smollm2_worker: Worker) -> None:
    """call -> tool result -> answer, the SDK's own message objects echoed back as history.

    SmolLM2's template ignores tools, so they reach it in the generic format; the first
    turn forces a call (`required`: SmolLM2 135M does not choose one on `auto`), the
    second leaves the choice to the model, which answers from the tool's result."""
    assert smollm2_worker.port is not None
    client = openai.OpenAI(
        api_key="unused", base_url=f"http://127.0.0.1:{smollm2_worker.port}/v1", max_retries=0
    )
    messages: list[Any] = [
        {"role": "system", "content": "You are a coding assistant. Use the tools."},
        {"role": "user", "content": "What does the file notes.txt say? Read it."},
    ]
    first = client.chat.completions.create(
        model=MODEL_ID,
        messages=messages,
        tools=cast(Any, NOTES_TOOLS),
        tool_choice="required",
        temperature=0,
        max_tokens=80,
    )
    assert first.choices[0].finish_reason == "tool_calls"
    message = first.choices[0].message
    assert message.content is None
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function"
    assert call.function.name == "read"
    jsonschema.validate(
        json.loads(call.function.arguments), NOTES_TOOLS[0]["function"]["parameters"]
    )
    assert first.system_fingerprint is not None
    history = [
        *messages,
        message,  # content: null with tool_calls, exactly as the SDK echoes it
        {"role": "tool", "tool_call_id": call.id, "content": "The meeting is at 10 am on Tuesday."},
    ]
    stream = client.chat.completions.create(
        model=MODEL_ID,
        messages=history,
        tools=cast(Any, NOTES_TOOLS),
        tool_choice="auto",
        temperature=0,
        max_tokens=60,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for c in chunk.choices:
            finish = c.finish_reason or finish
            text += c.delta.content or ""
    assert finish == "stop"
    assert "10 am" in text
    assert usage is not None
    records = smollm2_worker.records()
    assert [r["tools_rendering"] for r in records] == ["generic", "generic"]
    assert [r["outcome"] for r in records] == ["tool_calls", "stop"]
    # the tools are in the prompt (SmolLM2's own template would give ~40 tokens here)
    assert records[0]["prompt_tokens"] > 200
    # the second turn reuses the first's prompt from the KV cache
    assert records[1]["cached_prompt_tokens"] >= records[0]["prompt_tokens"] - 1
    assert usage.prompt_tokens == records[1]["prompt_tokens"]
