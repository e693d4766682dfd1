"""OpenAI `stop`: the answer ends where a stop string would begin, and none of it leaks.

The tiny model's text is noise, so the stop strings are taken from what it says: a
seeded request is made once without `stop`, a stretch of its answer becomes the stop
string, and the same request is repeated with it (seeded sampling is deterministic, so
both runs say the same until the stop). A 12-character stop string spans several of
the tiny vocabulary's tokens, so it arrives split across tokens.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from guest.worker.textstream import StopStrings, TextStreamer
from tests.guest.worker.conftest import MODEL_ID, READ_TOOL, Worker

EOS = "1021"
BASE: dict[str, Any] = {
    "model": MODEL_ID,
    "messages": [{"role": "user", "content": "hello"}],
    "seed": 23,
    "temperature": 1.5,
    "logit_bias": {EOS: -100},
}


def chat(client: httpx2.Client, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/chat/completions", json={**BASE, **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def stream(client: httpx2.Client, **extra: Any) -> tuple[list[str], str | None, dict[str, Any]]:
    """(content deltas, finish_reason, usage) of a streamed request."""
    deltas: list[str] = []
    finish = None
    usage: dict[str, Any] = {}
    body = {**BASE, **extra, "stream": True, "stream_options": {"include_usage": True}}
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            for choice in chunk["choices"]:
                if choice["delta"].get("content"):
                    deltas.append(choice["delta"]["content"])
                finish = choice.get("finish_reason") or finish
    return deltas, finish, usage


def clean_stretch(text: str, length: int) -> str:
    """A stretch from the middle of *text* with no replacement character in it."""
    for start in range(len(text) // 3, len(text) - length):
        piece = text[start : start + length]
        if "\ufffd" not in piece and piece.strip():
            return piece
    raise AssertionError(f"no clean stretch in the model's answer: {text!r}")


@pytest.mark.integration
def test_stop_string_cuts_the_answer_and_usage_stays_exact(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        full = chat(c, max_tokens=120)["choices"][0]["message"]["content"]
        stop = clean_stretch(full, 12)
        cut = full.index(stop)
        body = chat(c, max_tokens=120, stop=stop)
        used = body["usage"]["completion_tokens"]
        # exact: `used` tokens were needed for the stop string to appear, one fewer was not
        before = chat(c, max_tokens=used - 1)["choices"][0]["message"]["content"]
        at = chat(c, max_tokens=used)["choices"][0]["message"]["content"]
    assert body["choices"][0]["message"]["content"] == full[:cut]
    assert body["choices"][0]["finish_reason"] == "stop"
    assert stop not in before
    assert stop in at
    assert shared_worker.records()[-3]["completion_tokens"] == used


@pytest.mark.integration
def test_the_earliest_of_several_stop_strings_wins(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        full = chat(c, max_tokens=120)["choices"][0]["message"]["content"]
        late = clean_stretch(full[len(full) // 2 :], 6)
        early = clean_stretch(full[: len(full) // 2], 4)
        body = chat(c, max_tokens=120, stop=["\u2603 never said", late, early])
    assert body["choices"][0]["message"]["content"] == full[: full.index(early)]
    assert body["choices"][0]["finish_reason"] == "stop"


@pytest.mark.integration
def test_streamed_stop_string_never_leaks_partially(shared_worker: Worker) -> None:
    with shared_worker.client() as c:
        full = chat(c, max_tokens=120)["choices"][0]["message"]["content"]
        stop = clean_stretch(full, 12)
        whole = chat(c, max_tokens=120, stop=stop)
        deltas, finish, usage = stream(c, max_tokens=120, stop=stop)
    text = "".join(deltas)
    assert text == whole["choices"][0]["message"]["content"] == full[: full.index(stop)]
    assert finish == "stop"
    assert usage == whole["usage"]
    assert len(deltas) > 3  # it did stream, not one delta at the end


@pytest.mark.integration
def test_stop_string_does_not_cut_a_tool_call(shared_worker: Worker) -> None:
    """A call must stay whole JSON: `stop` ends text answers only (`"` is in every call)."""
    with shared_worker.client() as c:
        body = chat(c, max_tokens=200, tools=[READ_TOOL], tool_choice="required", stop='"')
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"])


def run_streamer(pieces: list[bytes], stops: tuple[str, ...]) -> tuple[list[str], bytes]:
    """Feed *pieces* as the engine does; (deltas sent, final output)."""
    sent: list[str] = []
    matcher = StopStrings(stops)
    streamer = TextStreamer(sent.append, tagged=False, stops=matcher)
    out = bytearray()
    for piece in pieces:
        grown_from = len(out)
        out += piece
        cut = matcher.find(out, grown_from)
        if cut is not None:
            del out[cut:]
            break
        streamer.feed(out)
    streamer.flush(out)
    return sent, bytes(out)


def test_streamer_holds_back_a_stop_prefix_split_across_tokens() -> None:
    sent, out = run_streamer([b"ab", b"c E", b"N", b"D tail"], ("END",))
    assert out == b"abc "
    assert sent == ["ab", "c "]  # "E", then "EN", were held back and never sent


def test_streamer_releases_a_false_alarm_and_utf8_split_across_tokens() -> None:
    snow = "\u2603".encode()
    sent, out = run_streamer([b"x E", b"Nd ", snow[:1], snow[1:], b"!"], ("END", "\u2603?"))
    assert out == b"x ENd " + snow + b"!"
    assert "".join(sent) == "x ENd \u2603!"
    assert sent[0] == "x "  # "E" waited until "N" and "d" showed it was not "END"
