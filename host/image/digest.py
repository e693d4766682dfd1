"""SHA-256 of files in 1 MiB chunks (the image's files are hundreds of MB)."""

import hashlib
from pathlib import Path

from host import cancel

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """Lower-case hex SHA-256 of the file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            cancel.check()  # a cancelled trial stops within one chunk
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
