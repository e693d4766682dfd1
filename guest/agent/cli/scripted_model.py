"""A scripted model for an agent CLI: the next step of a script as each chat completion.

Why: a control trial (an oracle, a null agent, a reward hack) must be able to drive an
agent CLI as it drives the harness's own loop, without a model: the script chooses
every call, the CLI parses it and runs it with its own tools, under the same
confinement. So this is the OpenAI-compatible endpoint the CLI is pointed at, on the
guest's loopback, for the run's length: each request gets the script's next step as
one tool call; a `finish` step, or the end of the script, is a text answer (a CLI
ends its run on a text answer). Usage is all zeros: no model counted anything, and the
turns are scripted (no worker request).

By hand, on the standard library's HTTP server: the guest's agent runtime has no ASGI
stack, and what is served is a few fixed-shape JSON bodies. The stream is the chunk
format the worker's stream uses (guest/worker/app.py `_Sse`): a role chunk, the call,
the finish reason, a usage chunk when asked, `[DONE]`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from guest.agent.policy import ProposedCall

FINISH = "finish"
"""The harness loop's closing step; to a CLI it is a text answer."""
DONE_TEXT = "Done."
MAX_BODY_BYTES = 8 << 20
"""A CLI's request (its whole conversation) is read up to this, then refused."""


@dataclass
class _Script:
    steps: Sequence[ProposedCall]
    served: int = 0
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self) -> tuple[int, ProposedCall | None]:
        """This request's number and its step, or None for a text answer: at `finish`, at
        the end of the script, and at every request after either (the run is over)."""
        with self.lock:
            index = self.served
            self.served += 1
            if index >= len(self.steps) or self.steps[index].name == FINISH:
                self.finished = True
            return index, None if self.finished else self.steps[index]


USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _chunk(model: str, choices: list[dict[str, Any]], usage: dict[str, int] | None) -> bytes:
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def stream_body(model: str, step: ProposedCall | None, index: int, include_usage: bool) -> bytes:
    """The SSE body answering one request: the step's call, or the closing text."""

    def choice(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}

    parts = [_chunk(model, [choice({"role": "assistant", "content": ""}, None)], None)]
    if step is None:
        parts.append(_chunk(model, [choice({"content": DONE_TEXT}, None)], None))
        parts.append(_chunk(model, [choice({}, "stop")], None))
    else:
        function = {"name": step.name, "arguments": step.arguments}
        call = {"index": 0, "id": f"call_{index}", "type": "function", "function": function}
        parts.append(_chunk(model, [choice({"tool_calls": [call]}, None)], None))
        parts.append(_chunk(model, [choice({}, "tool_calls")], None))
    if include_usage:
        parts.append(_chunk(model, [], USAGE))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def json_body(model: str, step: ProposedCall | None, index: int) -> bytes:
    """The non-streaming answer, for a client that does not stream."""
    message: dict[str, Any] = {"role": "assistant", "content": DONE_TEXT}
    finish = "stop"
    if step is not None:
        function = {"name": step.name, "arguments": step.arguments}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{index}", "type": "function", "function": function}],
        }
        finish = "tool_calls"
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }
    return json.dumps(body).encode()


def _handler(script: _Script, model: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._answer(404, b'{"error":{"code":"not_found"}}', "application/json")
                return
            try:
                length = int(self.headers.get("content-length", ""))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self._answer(413, b'{"error":{"code":"body_too_large"}}', "application/json")
                return
            try:
                request = json.loads(self.rfile.read(length))
            except ValueError:
                request = None
            if not isinstance(request, dict):
                self._answer(400, b'{"error":{"code":"invalid_json"}}', "application/json")
                return
            index, step = script.next()
            if request.get("stream") is True:
                options = request.get("stream_options")
                usage = isinstance(options, dict) and options.get("include_usage") is True
                body = stream_body(model, step, index, usage)
                self._answer(200, body, "text/event-stream")
            else:
                self._answer(200, json_body(model, step, index), "application/json")

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            """Nothing of the exchange is logged: the records say what happened."""

    return Handler


@contextmanager
def scripted_model(steps: Sequence[ProposedCall], model: str) -> Iterator[str]:
    """Serve `steps` on 127.0.0.1 for the block; yields the base URL (without /v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(_Script(steps), model))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="scripted-model", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
