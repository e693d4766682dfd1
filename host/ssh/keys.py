"""Ephemeral SSH keys for one trial: the guest's host key and the harness's client key.

Why generate the host key on the host: the guest's identity is then known before it
boots, so the connection pins it exactly (no trust-on-first-use, never
`known_hosts=None`). Both keys are ed25519, made per trial, written 0600 into the
trial's 0700 scratch directory for QEMU's `-fw_cfg` and never reused. The digest a
receipt carries is the SHA-256 of the host public key's SSH wire encoding.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh


@dataclass(frozen=True)
class TrialKeys:
    """The two key pairs of one trial."""

    host_key: asyncssh.SSHKey
    client_key: asyncssh.SSHKey

    @property
    def host_public(self) -> asyncssh.SSHKey:
        return self.host_key.convert_to_public()

    @property
    def host_key_sha256(self) -> str:
        """SHA-256 (hex) of the host public key blob: what the receipt pins."""
        return public_key_sha256(self.host_public)

    def host_private_openssh(self) -> bytes:
        return bytes(self.host_key.export_private_key("openssh"))

    def authorized_keys_line(self) -> bytes:
        return bytes(self.client_key.export_public_key("openssh"))


def public_key_sha256(key: asyncssh.SSHKey) -> str:
    return hashlib.sha256(key.public_data).hexdigest()


def generate_trial_keys() -> TrialKeys:
    """Two fresh ed25519 key pairs."""
    return TrialKeys(
        host_key=asyncssh.generate_private_key("ssh-ed25519"),
        client_key=asyncssh.generate_private_key("ssh-ed25519"),
    )


def write_private(path: Path, data: bytes) -> None:
    """Create `path` with mode 0600 (O_EXCL: never follow or reuse an existing file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class KeyFiles:
    """Where the fw_cfg payloads were written."""

    host_key: Path
    authorized_keys: Path


def write_key_files(keys: TrialKeys, directory: Path) -> KeyFiles:
    files = KeyFiles(directory / "guest_host_key", directory / "guest_authorized_keys")
    write_private(files.host_key, keys.host_private_openssh())
    write_private(files.authorized_keys, keys.authorized_keys_line())
    return files
