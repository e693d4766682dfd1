"""Disk space: the planned size bounds the real GGUF, short space is refused before
writing, and a write that runs out of room is ``disk_full`` with nothing left behind."""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from host.model.categories import ConvertError, OutType
from host.model.convert import convert, plan_conversion, planned_size
from host.model.diskspace import RESERVE_BYTES, require_free_space

OUTTYPES: list[OutType] = ["f32", "f16", "bf16", "q8_0"]


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("model", ["qwen3", "llama"])
def test_planned_size_bounds_the_gguf(
    tmp_path: Path, tiny_dir: Path, llama_dir: Path, outtype: OutType, model: str
) -> None:
    source = tiny_dir if model == "qwen3" else llama_dir
    planned = planned_size(plan_conversion(source, outtype))
    actual = convert(source, tmp_path / "out", outtype).size
    assert actual <= planned <= actual + (1 << 20)  # an upper bound, and a tight one


def test_require_free_space_against_the_real_filesystem(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    assert free > RESERVE_BYTES  # the machine running the tests has room to spare
    with pytest.raises(ConvertError) as info:
        require_free_space(tmp_path, free - RESERVE_BYTES + 1)
    assert info.value.category == "insufficient_disk_space"
    with pytest.raises(ConvertError):
        require_free_space(tmp_path, free)
    assert require_free_space(tmp_path, 0) >= RESERVE_BYTES


CHILD = """
import json, sys
from pathlib import Path
from host.model.categories import ConvertError
from host.model.convert import convert
try:
    convert(Path(sys.argv[1]), Path(sys.argv[2]), "f32")
    print(json.dumps({"result": "ok"}))
except ConvertError as exc:
    print(json.dumps({"result": exc.category}))
"""


def _limit_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_write_that_runs_out_of_room_is_disk_full(tmp_path: Path, tiny_dir: Path) -> None:
    """A child process whose files may not grow past 200 kB (RLIMIT_FSIZE): the f32 GGUF
    (about 690 kB) cannot be written; the refusal is closed and no partial remains."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tiny_dir), str(out)],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=lambda: _limit_file_size(200_000),
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout) == {"result": "disk_full"}
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no target, no staging dir


def test_convert_checks_free_space_before_it_starts(tmp_path: Path, tiny_dir: Path) -> None:
    """A real 8 MiB tmpfs (needs root, as the cgroup tests do): less than the reserve,
    so even the tiny model is refused before a byte is written."""
    fs = tmp_path / "fs"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(fs)], check=True)
    try:
        with pytest.raises(ConvertError) as info:
            convert(tiny_dir, fs / "out", "f32")
        assert info.value.category == "insufficient_disk_space"
        assert sorted(p.name for p in fs.iterdir()) == []
    finally:
        subprocess.run(["umount", str(fs)], check=True)
