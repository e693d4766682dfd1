"""Closed failure categories of the SSH channel to a guest (docs/engineering.md §3).

A caller records one of these and nothing else: never the exception text, which can
carry host paths, addresses or guest output.
"""

from typing import Literal

SshFailure = Literal[
    "banner_timeout",
    "connect_refused",
    "connect_timeout",
    "host_key_mismatch",
    "auth_failed",
    "protocol_error",
    "command_timeout",
    "connection_dropped",
    "transfer_failed",
    "transfer_too_large",
    "transfer_timeout",
]
"""Every way connecting, running a command or moving a file can fail."""
