"""The forwarded SSH port: choosing one and proving it closed.

Why pick-then-pass: QEMU 7.2's hostfwd needs a concrete port. The port is chosen by
binding 127.0.0.1:0 and closing it, so there is a short window in which another
process could take it; QEMU then fails to start (`qemu_start_failed`), it never
forwards someone else's port. Release is proven by a refused connection.
"""

from __future__ import annotations

import errno
import socket
from typing import Literal

PortState = Literal["refusing", "accepting", "unread"]


def pick_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def probe_port(port: int, timeout_s: float = 1.0) -> PortState:
    """Try to connect to 127.0.0.1:port: refused, accepted, or could not tell."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return "refusing"
        except OSError as exc:
            return "refusing" if exc.errno == errno.ECONNREFUSED else "unread"
        return "accepting"
