"""HashingFile hashes every byte in write order, off the writing thread.

The converter writes large chunks with ``write_nowait`` and asks for the digest at
the end; the digest must include every chunk still queued on the hashing thread.
64 MiB in 4 MiB chunks written to ``/dev/null`` (writes cost nothing, hashing does)
leaves a long queue, so a digest taken without waiting for it differs; a second
case writes a real file and checks its bytes.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np

from host.model.convert import HashingFile


def _chunks() -> list[bytes]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 256, 4 << 20, dtype=np.uint8).tobytes() for _ in range(16)]


def test_digest_waits_for_queued_chunks() -> None:
    chunks = _chunks()
    with HashingFile(io.FileIO("/dev/null", "wb")) as sink:
        sink.write(b"head")
        for chunk in chunks:
            sink.write_nowait(chunk)
        digest = sink.hexdigest()
    assert digest == hashlib.sha256(b"head" + b"".join(chunks)).hexdigest()


def test_file_bytes_count_and_digest(tmp_path: Path) -> None:
    chunks = _chunks()
    with HashingFile(io.FileIO(tmp_path / "out", "xb")) as sink:
        sink.write(b"head")  # synchronous: hashed when it returns
        for chunk in chunks:
            sink.write_nowait(chunk)
        digest = sink.hexdigest()
        count = sink.count
    data = b"head" + b"".join(chunks)
    assert count == len(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "out").read_bytes() == data
