"""A loopback HTTP relay that sets `tool_choice` on each chat request, for real clients
whose `tool_choice` cannot be configured (OpenCode always sends `auto`).

Why it exists: SmolLM2-135M does not choose a tool on `auto`, so a test of a real
client's multi-turn tool round trip forces the calls it wants, in order. Given
`max_string_chars`, it also gives the tools' string arguments a `maxLength` (greedy
SmolLM2 otherwise fills an `edit` string until the client's output limit and the call
is cut). Nothing else of the exchange changes: the body's `tool_choice` and those
`maxLength`s (and `Content-Length` with them); the response bytes go back untouched.
Each request is sent upstream with `Connection: close` and the relay closes the
client's connection after the response, so HTTP framing is never parsed on the way back.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from typing import Any


class ToolChoiceRelay:
    """Listens on 127.0.0.1; the i-th chat request with tools gets `choices[i]` (the last
    one repeats)."""

    def __init__(
        self, upstream_port: int, choices: list[Any], max_string_chars: int | None = None
    ) -> None:
        self.upstream_port = upstream_port
        self.choices = choices
        self.max_string_chars = max_string_chars
        self.seen: list[dict[str, Any]] = []
        """The chat requests that carried tools, as the client sent them."""
        self.requests: list[dict[str, Any]] = []
        """Every chat request, as the client sent it."""
        relay = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                relay._handle(self.rfile, self.connection)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ToolChoiceRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handle(self, rfile: Any, client: socket.socket) -> None:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = rfile.readline(65536)
            if not line:
                return
            head += line
        lines = head.decode("latin-1").split("\r\n")
        request_line, fields = lines[0], [x for x in lines[1:] if x]
        headers = [(k.strip(), v.strip()) for k, _, v in (f.partition(":") for f in fields)]
        length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
        body = rfile.read(length) if length else b""
        if request_line.startswith("POST ") and "/chat/completions" in request_line:
            data = json.loads(body)
            self.requests.append(data)
            if data.get("tools"):  # a title or summary request has none: left alone
                index = len(self.seen)
                self.seen.append(data)
                data["tool_choice"] = self.choices[min(index, len(self.choices) - 1)]
                if self.max_string_chars is not None:
                    for tool in data["tools"]:
                        _cap_strings(tool["function"].get("parameters", {}), self.max_string_chars)
                body = json.dumps(data).encode()
        kept = [(k, v) for k, v in headers if k.lower() not in ("content-length", "connection")]
        out = [request_line, *(f"{k}: {v}" for k, v in kept)]
        out += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=600) as up:
            up.sendall("\r\n".join(out).encode("latin-1") + body)
            for chunk in _chunks(up):
                client.sendall(chunk)


def _cap_strings(schema: dict[str, Any], cap: int) -> None:
    """Give each top-level string property without a smaller `maxLength` this one."""
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict) and prop.get("type") == "string":
            prop["maxLength"] = min(prop.get("maxLength", cap), cap)


def _chunks(sock: socket.socket) -> Iterator[bytes]:
    while True:
        data = sock.recv(65536)
        if not data:
            return
        yield data
