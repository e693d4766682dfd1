"""The one exception type of the SSH channel, carrying a closed category."""

from host.ssh.categories import SshFailure


class SshError(Exception):
    """Connecting, running or transferring failed with a closed category."""

    def __init__(self, category: SshFailure) -> None:
        self.category: SshFailure = category
        super().__init__(category)
