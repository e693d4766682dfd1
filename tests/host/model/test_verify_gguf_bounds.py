"""What the read-back verifier holds in memory and reads from disk: source slices of a
bounded size, at most two chunks waiting for the hash, and the GGUF read once.

Why: verification of an 8 GB GGUF must fit beside the trial's other budgets, and its
digest is claimed to be "of the bytes that were checked" in one pass. A change that
keeps every verdict but reads the file twice, or a tensor whole, passes every test of
the verdicts (found by mutation).
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import pytest

from host.model.convert import convert, plan_conversion
from host.model.verify_gguf import HashingReader, _source_slices, verify_gguf
from tests.host.model.helpers import stored_bytes


@pytest.mark.parametrize(("rows_in_budget", "rows_per_slice"), [(0, 1), (1, 1), (3, 3), (7, 7)])
def test_source_slices_are_whole_rows_within_the_chunk_budget(
    tiny_dir: Path, rows_in_budget: int, rows_per_slice: int
) -> None:
    """A 2-D tensor is read in slices of as many whole rows as fit the chunk budget
    once widened to float32 (4 bytes a value), and at least one row when not even one
    fits; never whole. A 1-D tensor is one slice."""
    plan = plan_conversion(tiny_dir, "q8_0")
    tensor = next(t for t in plan.tensors if len(t.shape) == 2 and t.shape[0] > 8)
    row_values = math.prod(tensor.shape[1:])
    budget = rows_in_budget * row_values * 4 + 3  # 3 bytes over, short of one row more
    slices = list(_source_slices(plan, tensor, budget))
    sizes = [raw.shape[0] for _, raw in slices]
    assert sizes[:-1] == [rows_per_slice] * (len(sizes) - 1)
    assert 0 < sizes[-1] <= rows_per_slice and sum(sizes) == tensor.shape[0]
    assert b"".join(data for data, _ in slices) == stored_bytes(tensor)

    norm = next(t for t in plan.tensors if len(t.shape) == 1)
    whole = list(_source_slices(plan, norm, 4))  # a budget of one value: still whole
    assert [raw.shape for _, raw in whole] == [norm.shape]


class _HeldDigest:
    """A digest whose updates wait for ``release``: chunks pile up for the hash."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen = 0

    def update(self, data: bytes) -> None:
        self.release.wait(30)
        self.seen += len(data)


def test_at_most_two_chunks_wait_for_the_hash(tmp_path: Path) -> None:
    """While the hash is behind, a second chunk may be read (the compare and the hash
    overlap), a third waits for the first to be hashed: the bytes held for the hash
    are bounded by two chunks, however slow hashing is."""
    path = tmp_path / "f"
    path.write_bytes(os.urandom(4096))
    fd = os.open(path, os.O_RDONLY)
    reading = HashingReader(fd, 4096)
    held = _HeldDigest()
    reading._digest = held  # type: ignore[assignment]
    try:
        done: list[int] = []

        def read(n: int) -> None:
            reading.read(n * 1024, 1024)
            done.append(n)

        for n in (0, 1):
            worker = threading.Thread(target=read, args=(n,))
            worker.start()
            worker.join(5)
            assert done[-1:] == [n], f"read {n} waited with {n} chunk(s) pending"
        third = threading.Thread(target=read, args=(2,))
        third.start()
        third.join(0.5)
        assert done == [0, 1], "a third chunk was read with two waiting for the hash"
        held.release.set()
        third.join(10)
        assert done == [0, 1, 2]
    finally:
        held.release.set()
        reading.close()
        os.close(fd)


def test_the_gguf_is_read_once(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Comparing every tensor and hashing the file is one pass: the bytes read from the
    GGUF add up to its size (a read at the hashed offset is hashed then, not read again
    by the hash later)."""
    gguf_path = convert(tiny_dir, tmp_path / "out", "bf16").path
    inode = gguf_path.stat().st_ino
    read_bytes = {"gguf": 0}
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        data = real(fd, n, offset)
        if os.fstat(fd).st_ino == inode:
            read_bytes["gguf"] += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting)
    report = verify_gguf(gguf_path, tiny_dir, "bf16")
    assert read_bytes["gguf"] == report.size == gguf_path.stat().st_size
