"""Port release is proven by a refused connection, and an open port is seen as open."""

from __future__ import annotations

import socket

from host.vm.ports import pick_loopback_port, probe_port


def test_open_port_is_accepting_and_closed_port_is_refusing() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert probe_port(port) == "accepting"
    assert probe_port(port) == "refusing"
    assert probe_port(pick_loopback_port()) == "refusing"
