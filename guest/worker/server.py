"""Serve the app with uvicorn on a Unix socket and/or 127.0.0.1, and shut down promptly.

Two uvicorn behaviours are replaced. A request h11 cannot frame (negative or
non-numeric Content-Length, bad headers) gets the same OpenAI-shaped JSON error as
every other bad input instead of uvicorn's plain-text 400. And a shutdown signal
cancels the running generation through the abort callback at once (cancelled_shutdown)
instead of waiting for it to finish before closing.
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
from pathlib import Path
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from guest.worker.app import ChatEndpoint, build_app
from guest.worker.errors import error_body


class JsonErrorH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with framing errors answered as JSON (then closed)."""

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


def serve(chat: ChatEndpoint, sockets: list[socket.socket]) -> None:
    """Run until SIGINT/SIGTERM; in-flight requests are cancelled, not awaited."""
    config = uvicorn.Config(
        build_app(chat),
        http=JsonErrorH11Protocol,
        ws="none",
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=64 * 1024,
    )
    # uvicorn's loggers would print tracebacks (which can quote input): silence them;
    # the app logs its own closed events.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    server = WorkerServer(config, chat)
    asyncio.run(server.serve(sockets=sockets))
    chat.executor.shutdown(wait=True, cancel_futures=True)
