"""Serve the app with uvicorn on a Unix socket and/or 127.0.0.1, and shut down promptly.

Three uvicorn behaviours are replaced. A request h11 cannot frame (negative or
non-numeric Content-Length, bad headers) gets the same OpenAI-shaped JSON error as
every other bad input instead of uvicorn's plain-text 400. A shutdown signal cancels
the running generation through the abort callback at once (cancelled_shutdown) instead
of waiting for it to finish before closing. And a connection is bounded where uvicorn
leaves it open (200 slowloris connections would stay open forever): a connection
beyond `max_connections` is answered 503 and closed at once, and a request's headers
(from the connection's first byte, or a kept-alive connection's next byte) and body
must each arrive within their timeout, or the connection is answered 408 and closed.
What uvicorn/h11 already bound is configured, not rewritten: idle keep-alive
(`timeout_keep_alive`), header bytes (`h11_max_incomplete_event_size`) and buffered body
bytes (uvicorn stops reading a connection while more than 64 KiB of its body waits
for the app). Limits and their defaults: docs/worker-limits.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from guest.worker.app import ChatEndpoint, build_app
from guest.worker.errors import HttpErrorCode, error_body
from receipts.records.worker import ConnectionRefusal


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-server connection bounds (docs/worker-limits.md)."""

    max_connections: int = 64
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    """The app answers a late chat body itself (recorded); this backstop, 2 s later,
    closes any connection still sending a body (e.g. to an endpoint that reads none)."""
    keepalive_s: float = 5.0
    max_header_bytes: int = 64 * 1024


BACKSTOP_GRACE_S = 2.0
_REASONS = {408: b"Request Timeout", 503: b"Service Unavailable"}


def raw_json_response(status: int, code: HttpErrorCode) -> bytes:
    """A complete HTTP/1.1 JSON error response that closes the connection, written
    below h11 (which cannot answer a request it has not yet received)."""
    body = error_body(status, code)
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n"
    ) % (status, _REASONS[status], len(body))
    return head + body


class JsonErrorH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with framing errors answered as JSON (then closed), and
    every connection it refuses so recorded (`on_refusal`: no request record can say)."""

    on_refusal: Callable[[ConnectionRefusal], None] = staticmethod(lambda _refusal: None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._framing_error: str | None = None
        original = self.conn.next_event

        def next_event() -> Any:
            try:
                return original()
            except h11.RemoteProtocolError as exc:
                self._framing_error = str(exc)
                raise

        self.conn.next_event = next_event  # type: ignore[method-assign]

    def send_400_response(self, msg: str) -> None:
        detail = (self._framing_error or "").lower()
        code = "invalid_content_length" if "content-length" in detail else "invalid_http_request"
        body = error_body(400, code)  # type: ignore[arg-type]
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers)) or b"")
        self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
        self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        self.transport.close()
        self.on_refusal("unframed")


class GuardedH11Protocol(JsonErrorH11Protocol):
    """The JSON-error protocol with a connection limit and header/body read deadlines.

    One timer per connection: armed for the headers when the connection opens and when
    the first byte of a kept-alive connection's next request arrives, re-armed for the
    body once the headers are in, cancelled when the request has been read to its end.
    """

    limits: ConnectionLimits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timer: asyncio.TimerHandle | None = None
        self._phase: str | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refused = True
            transport.write(raw_json_response(503, "too_many_connections"))
            transport.close()
            self.on_refusal("over_limit")
            return
        self._arm("headers", self.limits.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._phase is None and self.conn.their_state is h11.IDLE:
            self._arm("headers", self.limits.header_timeout_s)
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY and self._phase != "body":
            # From the headers, or (a pipelined request parsed from the buffer) now.
            self._arm("body", self.limits.body_timeout_s + BACKSTOP_GRACE_S)
        elif state is not h11.IDLE and state is not h11.SEND_BODY:
            self._disarm()

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._read_timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer = None
        self._phase = None

    def _expired(self) -> None:
        """408 and close, unless this request's answer has already gone out (then only
        close: a second response would be garbage to the client)."""
        phase = self._phase
        self._read_timer = None
        self._phase = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        answered = (
            cycle is not None
            and cycle.response_started
            and not (phase == "headers" and cycle.response_complete)
        )
        if not answered:
            self.transport.write(raw_json_response(408, "request_timeout"))
            self.on_refusal("header_timeout" if phase == "headers" else "body_timeout")
        self.transport.close()


def protocol_for(
    limits: ConnectionLimits,
    on_refusal: Callable[[ConnectionRefusal], None] | None = None,
) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, bound to *limits* and to
    where its refusals are recorded."""
    bound: dict[str, Any] = {"limits": limits}
    if on_refusal is not None:
        bound["on_refusal"] = staticmethod(on_refusal)
    return type("WorkerH11Protocol", (GuardedH11Protocol,), bound)


class WorkerServer(uvicorn.Server):
    """Cancels in-flight generation the moment a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, chat: ChatEndpoint) -> None:
        super().__init__(config)
        self._chat = chat

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # uvicorn would re-raise the signal after shutdown (exit by signal, no cleanup);
        # a worker that shut down as asked exits 0 after unlinking its socket.
        self._chat.shutdown()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True


def bind_unix(path: Path) -> socket.socket:
    """Bind a 0600 Unix socket; a stale socket file nobody listens on is replaced."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise FileExistsError(errno.EEXIST, "socket path exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            os.unlink(path)
        else:
            raise FileExistsError(errno.EADDRINUSE, "socket in use")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.listen(64)
    return sock


def bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def serve(
    chat: ChatEndpoint, sockets: list[socket.socket], limits: ConnectionLimits | None = None
) -> None:
    """Run until SIGINT/SIGTERM; in-flight requests are cancelled, not awaited."""
    limits = limits or ConnectionLimits()
    config = uvicorn.Config(
        build_app(chat),
        http=protocol_for(limits, chat.records.refused),
        ws="none",
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=limits.keepalive_s,  # type: ignore[arg-type]
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
    # uvicorn's loggers would print tracebacks (which can quote input): silence them;
    # the app logs its own closed events.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    server = WorkerServer(config, chat)
    asyncio.run(server.serve(sockets=sockets))
    chat.prep.shutdown(wait=True, cancel_futures=True)
    chat.executor.shutdown(wait=True, cancel_futures=True)
