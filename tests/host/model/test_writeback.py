"""Early writeback is a hint on top of the fsync, never instead of it.

The converter hands each 32 MiB it has written to the disk (``sync_file_range``) so
the fsync before the rename has less left to do. These tests check that the kernel
accepts the call (the ctypes binding is right), that the ranges handed over are
contiguous from offset 0 and within the file, that the output bytes do not depend on
it, and that the whole GGUF is still fsynced before it is renamed into place.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import host.model.convert as convert_module
from host.model.convert import convert
from host.model.writeback import start_writeback


def test_kernel_accepts_the_request(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with path.open("wb") as handle:
        handle.write(b"x" * 65536)
        handle.flush()
        assert start_writeback(handle.fileno(), 0, 65536)
        assert not start_writeback(handle.fileno(), 0, 0)
    assert not start_writeback(-1, 0, 4096)  # refused: bad descriptor


def test_ranges_are_contiguous_and_output_unchanged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llama_dir: Path
) -> None:
    plain = convert(llama_dir, tmp_path / "plain", "bf16")
    ranges: list[tuple[int, int, int]] = []

    def record(fd: int, offset: int, nbytes: int) -> bool:
        ranges.append((offset, nbytes, os.fstat(fd).st_size))
        return start_writeback(fd, offset, nbytes)

    monkeypatch.setattr(convert_module, "WRITEBACK_BYTES", 64 << 10)
    monkeypatch.setattr(convert_module, "start_writeback", record)
    kicked = convert(llama_dir, tmp_path / "kicked", "bf16")
    assert kicked.sha256 == plain.sha256
    assert kicked.path.read_bytes() == plain.path.read_bytes()
    assert len(ranges) >= 3
    end = 0
    for offset, nbytes, size_then in ranges:
        assert offset == end and nbytes >= 64 << 10
        end = offset + nbytes
        assert end <= size_then  # flushed into the file before it was handed over
    assert end <= kicked.size


def test_the_gguf_is_fsynced_before_the_rename(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llama_dir: Path
) -> None:
    out = tmp_path / "out"
    synced: list[tuple[str, int, bool]] = []
    real_fsync = os.fsync

    def record(fd: int) -> None:
        info = os.fstat(fd)
        kind = "file" if stat.S_ISREG(info.st_mode) else "other"
        synced.append((kind, info.st_size, (out / "model.gguf").exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", record)
    result = convert(llama_dir, out, "bf16")
    assert ("file", result.size, False) in synced  # the whole file, still staged
