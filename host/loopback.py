"""Whether this network namespace's loopback carries a TCP connection.

Why: the harness reaches every guest over QEMU's user-network forward on 127.0.0.1
(SSH), so a namespace whose `lo` is down (a fresh `unshare -n`, an empty container
netns) cannot run a trial. Without this probe such a trial boots a guest, waits out the
whole boot deadline and ends `vm: ssh_timeout`, which names the wrong thing. Binding
alone is not proof: with `lo` down, bind and listen on 127.0.0.1 succeed and only the
connect fails (ENETUNREACH, measured here), so the probe connects.
"""

from __future__ import annotations

import socket

PROBE_TIMEOUT_S = 1.0


def loopback_usable(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when a TCP connection to a listener on 127.0.0.1 is accepted."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            with socket.create_connection(listener.getsockname(), timeout=timeout_s):
                accepted, _ = listener.accept()
                accepted.close()
    except OSError:
        return False
    return True
