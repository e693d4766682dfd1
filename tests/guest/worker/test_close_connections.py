"""`--close-connections`: every response closes its connection, over real HTTP.

Why the worker has it: OpenCode's fetch reuses a pooled connection the worker closed
while idle (its keep-alive, 5 s, passes while OpenCode runs a tool under TCG) and does
not retry the POST: measured in a guest as `Malformed_HTTP_Response` on its fourth
request. A connection closed after each response is never reused.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.guest.worker.conftest import MODEL_ID, Gguf, start_worker

pytestmark = pytest.mark.integration

CHAT = json.dumps(
    {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
).encode()


def _exchange(port: int) -> tuple[bytes, bytes]:
    """One chat request on a raw socket: the response head, and what a read after the
    whole response gets (b"" once the server closed the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
            b"content-type: application/json\r\n"
            + f"content-length: {len(CHAT)}\r\n\r\n".encode()
            + CHAT
        )
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 200")
        sock.settimeout(2.0)
        try:
            after = sock.recv(1)
        except TimeoutError:
            after = b"still open"
        return head.lower(), after


@pytest.mark.parametrize("close", [True, False])
def test_responses_close_their_connection_when_asked(
    tiny_gguf: Gguf, tmp_path: Path, close: bool
) -> None:
    """Mutation control: `build_app` without the `closing` wrapper leaves the connection
    open (the False case's answer) with the flag given."""
    extra = ("--close-connections",) if close else ()
    worker = start_worker(tiny_gguf, tmp_path / "w", *extra, port=True)
    try:
        assert worker.port is not None
        header, after = _exchange(worker.port)
    finally:
        worker.stop()
    assert (b"connection: close" in header) is close
    assert after == (b"" if close else b"still open")
