"""The one pass leaves the bytes it is done with out of the page cache.

Why it matters: a prepare moves 8 GB in and 8 GB out. Left cached, those pages pushed
the machine into reclaim during the pass, and reclaim was most of the pass's CPU time
(docs/model-conversion.md, "Page cache"). These tests read residency with util-linux's
``fincore`` (what the kernel reports through ``mincore``), on files in pytest's tmp
directory (a disk file system: on tmpfs nothing can be dropped).
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import host.model.sourcehash as sourcehash_module
from host.model.convert import HashingFile
from host.model.sourcehash import HashedSource

MIB = 1 << 20


def resident(path: Path) -> int:
    """Bytes of *path* in the page cache."""
    done = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip())


def test_a_source_read_through_the_pass_is_not_left_cached(tmp_path: Path) -> None:
    """Every range is dropped once it is in our buffer, so after reading a 48 MiB shard
    (written, synced and so cached first) none of it stays. Mutation control: ``DROP_READ``
    made False leaves the whole file cached and this test fails."""
    path = tmp_path / "shard"
    with path.open("wb") as handle:
        handle.write(os.urandom(48 * MIB))
        os.fsync(handle.fileno())  # clean pages, as a snapshot on disk is
    assert resident(path) >= 40 * MIB  # just written: cached
    source = HashedSource("shard", path)
    try:
        buffer = memoryview(bytearray(4 * MIB))
        for offset in range(0, 48 * MIB, 4 * MIB):
            future = source.read_into(buffer, offset)
            assert future is not None
            future.result()
        digest, size = source.finish()
    finally:
        source.close()
    assert size == 48 * MIB and len(digest) == 64
    assert resident(path) == 0
    assert sourcehash_module.DROP_READ


def test_written_output_is_dropped_a_step_behind_the_writeback(tmp_path: Path) -> None:
    """Each 8 MiB handed to the disk is dropped from the cache one step later: of 64 MiB
    written, at most the last two steps are still cached before the final flush.
    Mutation control: without ``drop_written`` in ``HashingFile.write_nowait`` all
    64 MiB stay cached and this test fails."""
    path = tmp_path / "out.gguf"
    block = os.urandom(MIB)
    with HashingFile(io.FileIO(path, "xb"), 8 * MIB) as sink:
        for _ in range(64):
            sink.write(block)
        sink.flush()
        assert resident(path) <= 2 * 8 * MIB + MIB
        assert sink.dropped_from >= 48 * MIB
    assert path.stat().st_size == 64 * MIB
