"""SSH to a guest: ephemeral pinned keys, banner wait, commands with deadlines, SFTP.

`generate_trial_keys()` makes the guest's host key and the client key before boot;
`wait_for_banner()` waits for sshd behind QEMU's hostfwd; `connect()` pins the host
key; `SshSession.run/put/get` carry deadlines. Failures are `SshError` with a closed
`SshFailure` category.
"""

from host.ssh.banner import open_ssh_socket, wait_for_banner
from host.ssh.categories import SshFailure
from host.ssh.client import (
    CommandResult,
    RemoteProcess,
    SshSession,
    connect,
    pinned_known_hosts,
)
from host.ssh.errors import SshError
from host.ssh.keys import (
    KeyFiles,
    TrialKeys,
    generate_trial_keys,
    public_key_sha256,
    write_key_files,
)

__all__ = [
    "CommandResult",
    "KeyFiles",
    "RemoteProcess",
    "SshError",
    "SshFailure",
    "SshSession",
    "TrialKeys",
    "connect",
    "generate_trial_keys",
    "open_ssh_socket",
    "pinned_known_hosts",
    "public_key_sha256",
    "wait_for_banner",
    "write_key_files",
]
