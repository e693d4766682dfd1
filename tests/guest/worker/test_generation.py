"""Every response is valid text or a schema-valid tool call, at any temperature.

Real llama.cpp on the tiny random-weight model (its output is noise, which is the point:
only the constraint stands between noise and an invalid call), over real HTTP on a
Unix socket. The checks here do not trust the worker's validator: each call is parsed
and validated again with `jsonschema` against the schema the request sent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx2
import jsonschema
import pytest

from tests.guest.worker.conftest import MODEL_ID, TOOLS, Worker

SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
CHOICES: list[Any] = [
    "required",
    "auto",
    {"type": "function", "function": {"name": "edit"}},
    "required",
    {"type": "function", "function": {"name": "read"}},
]


def check_response(body: dict[str, Any], choice: Any) -> str:
    """Assert the response is valid text or a valid call; return its finish_reason."""
    (only,) = body["choices"]
    message, finish = only["message"], only["finish_reason"]
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] >= 1
    if finish == "tool_calls":
        (call,) = message["tool_calls"]
        assert call["type"] == "function"
        assert call["id"].startswith("call_")
        arguments = call["function"]["arguments"]
        assert isinstance(arguments, str)
        name = call["function"]["name"]
        if isinstance(choice, dict):
            assert name == choice["function"]["name"]
        jsonschema.Draft202012Validator(SCHEMAS[name]).validate(json.loads(arguments))
        assert message["content"] is None
        return "tool_calls"
    assert "tool_calls" not in message
    assert finish in ("stop", "length")
    if choice == "required" or isinstance(choice, dict):
        # a forced call may only be cut by max_tokens, never replaced by text
        assert finish == "length"
        assert message["content"] is None
    else:
        assert isinstance(message["content"], str)
        assert "<tool_call>" not in message["content"]
    return str(finish)


def run_seeds(client: httpx2.Client, temperature: float, seeds: range) -> Counter[str]:
    finishes: Counter[str] = Counter()
    for seed in seeds:
        choice = CHOICES[seed % len(CHOICES)]
        response = client.post(
            "/v1/chat/completions",
            json={
                "model": MODEL_ID,
                "messages": [
                    {"role": "system", "content": "You edit files."},
                    {"role": "user", "content": f"Task {seed}: fix the bug in src/app{seed}.py"},
                ],
                "tools": TOOLS,
                "tool_choice": choice,
                "temperature": temperature,
                "seed": seed,
                "max_tokens": 200,
            },
        )
        assert response.status_code == 200, response.text
        finishes[check_response(response.json(), choice)] += 1
    return finishes


@pytest.mark.integration
@pytest.mark.parametrize("temperature", [1.5, 0.0])
def test_200_seeds_give_valid_text_or_valid_calls(
    worker_factory: Callable[..., Worker], temperature: float
) -> None:
    worker = worker_factory("--context", "2048")
    finishes = run_seeds(worker.client(), temperature, range(200))
    assert sum(finishes.values()) == 200
    # the constraint must actually produce calls, not only text or cut-offs
    assert finishes["tool_calls"] >= 100, finishes
    records = worker.records()
    assert len(records) == 200
    assert {r["constraint_backend"] for r in records} == {"llguidance"}
    assert all(r["outcome"] in ("tool_calls", "stop", "length") for r in records)


@pytest.mark.integration
def test_gbnf_fallback_gives_valid_calls(worker_factory: Callable[..., Worker]) -> None:
    worker = worker_factory("--context", "2048", "--constraint", "gbnf")
    finishes = run_seeds(worker.client(), 1.5, range(30))
    assert finishes["tool_calls"] >= 15, finishes
    assert {r["constraint_backend"] for r in worker.records()} == {"gbnf"}
