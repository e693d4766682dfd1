"""A loopback npm registry for the tests: serves the tarballs it is given, real HTTP."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from host.agents.npmtarball import NpmFile


def tarball(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def pin_for(package: str, tgz: bytes, member: str, data: bytes) -> NpmFile:
    return NpmFile(
        package=package,
        version="1.0.0",
        integrity="sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
        tarball_size=len(tgz),
        member=member,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


@contextmanager
def serving(files: dict[str, bytes]) -> Iterator[str]:
    """Serve `files` (URL path -> body) on 127.0.0.1; yields the registry's base URL."""
    requested: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            body = files.get(self.path)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
