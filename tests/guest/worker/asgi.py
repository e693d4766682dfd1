"""Drive `ChatEndpoint` in process, as the ASGI server would, with nothing between.

Why not an HTTP client: the endpoint's own checks (Content-Length framing, a body that
arrives in pieces or stalls, a client that leaves mid-generation, a send that fails)
are what these tests exercise, and a client library either cannot produce those or a
real server answers them before the endpoint sees them. The endpoint runs on the real
engine and model; only the transport is the test's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from guest.worker.app import ChatEndpoint

Message = MutableMapping[str, Any]


def body_of(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode()


def length_header(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]


def parts(body: bytes, *cuts: int) -> list[Message]:
    """`http.request` messages holding *body* cut at *cuts*; the last one ends the body."""
    bounds = [0, *cuts, len(body)]
    pieces = [body[a:b] for a, b in itertools.pairwise(bounds)]
    return [
        {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        for i, piece in enumerate(pieces)
    ]


def sse_events(raw: bytes) -> list[Any]:
    """The `data:` payloads of an SSE body: parsed JSON, or the literal `[DONE]`."""
    events: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            payload = block[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


@dataclass
class Exchange:
    """Everything the endpoint sent for one request."""

    sent: list[Message] = field(default_factory=list)

    @property
    def start(self) -> Message:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        assert len(starts) == 1, self.sent
        return starts[0]

    @property
    def status(self) -> int:
        status: int = self.start["status"]
        return status

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.start["headers"])

    @property
    def body(self) -> bytes:
        bodies = [m for m in self.sent if m["type"] == "http.response.body"]
        assert bodies, self.sent
        assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]
        return b"".join(m["body"] for m in bodies)

    def json(self) -> Any:
        assert self.headers[b"content-type"] == b"application/json"
        assert self.headers[b"content-length"] == str(len(self.body)).encode()
        return json.loads(self.body)

    def error(self) -> tuple[int, str, str | None]:
        error = self.json()["error"]
        return self.status, error["code"], error["param"]

    def events(self) -> list[Any]:
        assert self.headers[b"content-type"] == b"text/event-stream"
        return sse_events(self.body)


@dataclass
class Client:
    """The client side of one request: body messages as the test feeds them, then
    silence until it `leave`s.

    After its body a real client sends nothing until it goes away, and the endpoint
    reads `receive` during generation only to see that moment (`http.disconnect`).
    """

    messages: deque[Message]
    left: bool = False
    on_send: Callable[[Message], Awaitable[None]] | None = None
    """Called with each message the endpoint sends, before it is kept."""
    exchange: Exchange = field(default_factory=Exchange)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self) -> Message:
        while True:
            if self.messages:
                return self.messages.popleft()
            if self.left:
                return {"type": "http.disconnect"}
            self._changed.clear()
            await self._changed.wait()

    async def send(self, message: Message) -> None:
        if self.on_send is not None:
            await self.on_send(message)
        self.exchange.sent.append(message)

    def feed(self, messages: list[Message]) -> None:
        self.messages.extend(messages)
        self._changed.set()

    def leave(self) -> None:
        self.left = True
        self._changed.set()


def on_nth(
    count: int, matches: Callable[[Message], bool], then: Callable[[], None]
) -> Callable[[Message], Awaitable[None]]:
    """An `on_send` hook: *then* runs as the *count*-th sent message that *matches*
    goes out (before it is kept; an exception from *then* is the send's)."""
    seen = 0

    async def hook(message: Message) -> None:
        nonlocal seen
        if matches(message):
            seen += 1
            if seen == count:
                then()

    return hook


def unexpected(*_args: object) -> NoReturn:
    """A dependency failing in a way nobody anticipated (monkeypatched in its place)."""
    raise ZeroDivisionError


def scope(headers: list[tuple[bytes, bytes]]) -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "headers": headers,
    }


def client_for(
    body: bytes | dict[str, Any],
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    messages: list[Message] | None = None,
) -> tuple[Message, Client]:
    """The scope and client for *body* (a dict is sent as JSON), sent whole by default."""
    raw = body if isinstance(body, bytes) else body_of(body)
    client = Client(deque(messages if messages is not None else parts(raw)))
    return scope(length_header(raw) if headers is None else headers), client


async def post(
    chat: ChatEndpoint,
    body: bytes | dict[str, Any],
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    messages: list[Message] | None = None,
    timeout: float = 60.0,
) -> Exchange:
    """One request, whole; the endpoint must finish within *timeout* seconds."""
    request_scope, client = client_for(body, headers=headers, messages=messages)
    await asyncio.wait_for(chat(request_scope, client.receive, client.send), timeout)
    return client.exchange
