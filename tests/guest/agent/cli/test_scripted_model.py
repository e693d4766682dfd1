"""The scripted model an agent CLI is pointed at for a control trial: real HTTP on
loopback, the script's steps one per request, a text answer at `finish` or the end."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from guest.agent.cli.scripted_model import DONE_TEXT, USAGE, scripted_model
from guest.agent.policy import ProposedCall

STEPS = (
    ProposedCall(name="read", arguments='{"filePath":"a.py"}'),
    ProposedCall(name="bash", arguments='{"command":"true","description":"x"}'),
    ProposedCall(name="finish", arguments="{}"),
    ProposedCall(name="read", arguments='{"filePath":"never.py"}'),
)


def _post(url: str, body: bytes, path: str = "/v1/chat/completions") -> tuple[int, bytes, str]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request("POST", path, body, {"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("content-type", "")
    finally:
        connection.close()


def _chat(url: str, **fields: Any) -> tuple[int, bytes, str]:
    return _post(url, json.dumps({"model": "scripted", "messages": [], **fields}).encode())


def _events(body: bytes) -> list[Any]:
    lines = [line for line in body.split(b"\n\n") if line]
    assert all(line.startswith(b"data: ") for line in lines)
    assert lines[-1] == b"data: [DONE]"
    return [json.loads(line[6:]) for line in lines[:-1]]


def test_each_request_streams_the_next_step_then_the_closing_text() -> None:
    with scripted_model(STEPS, "scripted") as url:
        first = _events(_chat(url, stream=True, stream_options={"include_usage": True})[1])
        second = _events(_chat(url, stream=True)[1])
        third = _events(_chat(url, stream=True)[1])
        fourth = _events(_chat(url, stream=True)[1])
    call = first[1]["choices"][0]["delta"]["tool_calls"][0]
    assert (call["function"]["name"], call["function"]["arguments"]) == ("read", STEPS[0].arguments)
    assert first[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert first[3] == {**first[3], "choices": [], "usage": USAGE}  # usage asked: all zeros
    assert second[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "bash"
    assert len(second) == 3  # no usage chunk unless asked
    for closing in (third, fourth):  # `finish`, and whatever follows it, is the answer
        assert closing[1]["choices"][0]["delta"] == {"content": DONE_TEXT}
        assert closing[2]["choices"][0]["finish_reason"] == "stop"


def test_a_client_that_does_not_stream_gets_one_body() -> None:
    with scripted_model(STEPS[:1], "scripted") as url:
        status, body, kind = _chat(url)
        _, last, _ = _chat(url)
    assert (status, kind) == (200, "application/json")
    message = json.loads(body)["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "read"
    assert json.loads(last)["choices"][0] == {
        "index": 0,
        "message": {"role": "assistant", "content": DONE_TEXT},
        "finish_reason": "stop",
    }


def test_bad_requests_are_refused_without_taking_a_step() -> None:
    with scripted_model(STEPS, "scripted") as url:
        assert _post(url, b"{}", path="/v1/models")[0] == 404
        assert _post(url, b"{not json")[0] == 400
        assert _post(url, b"[]")[0] == 400
        status, body, _ = _chat(url)
    assert status == 200  # the first step is still the first served
    assert json.loads(body)["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read"
