"""Usage and finish_reason say what happened (docs/engineering.md §12)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from tests.guest.worker.conftest import MODEL_ID, Worker

EOS = "1021"


def chat(client: httpx2.Client, **extra: Any) -> dict[str, Any]:
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hello"}], **extra}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


@pytest.mark.integration
def test_length_counts_exactly_max_tokens(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        body = chat(c, max_tokens=37, seed=5, temperature=1.0, logit_bias={EOS: -100})
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 37
    assert shared_worker.records()[-1]["completion_tokens"] == 37


@pytest.mark.integration
def test_stop_counts_the_end_token(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        body = chat(c, max_tokens=37, logit_bias={EOS: 100})
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["content"] == ""
    assert body["usage"]["completion_tokens"] == 1


@pytest.mark.integration
def test_stream_deltas_equal_the_non_streamed_answer(shared_worker: Worker) -> None:
    request = {"max_tokens": 60, "seed": 11, "temperature": 1.2, "logit_bias": {EOS: -100}}
    with shared_worker.client() as c:
        whole = chat(c, **request)
        text = ""
        usage = None
        with c.stream(
            "POST",
            "/v1/chat/completions",
            json={"model": MODEL_ID, "messages": [{"role": "user", "content": "hello"}],
                  "stream": True, "stream_options": {"include_usage": True}, **request},
        ) as r:  # fmt: skip
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk["choices"]:
                    text += choice["delta"].get("content") or ""
    assert text == whole["choices"][0]["message"]["content"]
    assert usage == whole["usage"]


@pytest.mark.integration
def test_records_carry_no_prompt_or_output_text(shared_worker: Worker) -> None:
    marker = "zebra-quartz-4471"
    with shared_worker.client() as c:
        body = chat(c, max_tokens=30, seed=2, logit_bias={EOS: -100},
                    messages=[{"role": "user", "content": marker}])  # fmt: skip
    output = body["choices"][0]["message"]["content"]
    document = json.dumps(shared_worker.records())
    log_text = shared_worker.stderr_file.read_text()
    assert marker not in document
    assert marker not in log_text
    words = [w for w in output.split() if len(w) >= 6]
    assert all(w not in log_text and w not in document for w in words)
