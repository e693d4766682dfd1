"""Hash the GGUF before llama.cpp maps it, and stop between reads when told to.

Why here and not only at conversion time: the bytes that count are the ones this
process is about to load. A file swapped or damaged after it was pinned must be
refused where it loads. Reads are 1 MiB so a cancel or deadline is honoured within
one read (an 8 GB model hashes in ~5 s; a shutdown must not wait for that).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Literal

CHUNK_BYTES = 1 << 20

DigestOutcome = Literal["match", "mismatch", "unreadable", "cancelled"]


def verify_digest(
    path: Path, expected_hex: str, should_stop: Callable[[], bool] = lambda: False
) -> DigestOutcome:
    """SHA-256 of *path* in 1 MiB reads compared with *expected_hex* (lower-case hex).

    `should_stop` is polled before every read; when it answers true the hash stops and
    the outcome is `cancelled` (never `match`). Symlinks and non-regular files are
    `unreadable`: the pin names a file, not whatever a link points to today.
    """
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return "unreadable"
    try:
        with os.fdopen(fd, "rb", buffering=0) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return "unreadable"
            buffer = bytearray(CHUNK_BYTES)
            view = memoryview(buffer)
            while True:
                if should_stop():
                    return "cancelled"
                n = handle.readinto(buffer)
                if not n:
                    break
                digest.update(view[:n])
    except OSError:
        return "unreadable"
    if hmac.compare_digest(digest.hexdigest(), expected_hex):
        return "match"
    return "mismatch"
