"""Progress bars appear on a terminal and nowhere else (host/model/progress.py).

A real pseudo-terminal stands in for the person at the terminal; a pipe stands in
for CI logs. Both run the real hashing and conversion code.
"""

from __future__ import annotations

import io
import os
import pty
import select
from pathlib import Path

from host.model import progress
from host.model.convert import plan_conversion, write_gguf
from host.model.pins import sha256_file


def _drain(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out


def _work(tiny_dir: Path, tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    sha256_file(tiny_dir / "model.safetensors")
    write_gguf(plan_conversion(tiny_dir, "bf16"), tmp_path / "out.gguf")


def test_terminal_gets_bars_for_hashing_and_conversion(tiny_dir: Path, tmp_path: Path) -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            assert progress.wants_bars(terminal)
            with progress.progress_on(terminal) as reporter:
                assert isinstance(reporter, progress.RichReporter)
                _work(tiny_dir, tmp_path)
            terminal.flush()
        shown = _drain(master).decode("utf-8", "replace")
    finally:
        os.close(master)
        os.close(slave)
    assert "hash model.safetensors" in shown
    assert "convert bf16" in shown
    assert progress.current() is not reporter  # uninstalled afterwards


def test_pipe_and_file_get_nothing(tiny_dir: Path, tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "w", closefd=False) as pipe:
            assert not progress.wants_bars(pipe)
            with progress.progress_on(pipe) as reporter:
                assert isinstance(reporter, progress.NullReporter)
                _work(tiny_dir, tmp_path / "a")
            pipe.flush()
        os.close(write_end)
        assert _drain(read_end) == b""
    finally:
        os.close(read_end)
    buffer = io.StringIO()
    with progress.progress_on(buffer):
        _work(tiny_dir, tmp_path / "b")
    assert buffer.getvalue() == ""
