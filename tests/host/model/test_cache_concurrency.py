"""The model cache between real processes: one conversion, the others adopt (§15).

Each filler is a real process calling `prepare_model` on the same tiny checkpoint and
cache root; its progress hook logs its pid and slows each tensor down, so fills started
together overlap for seconds. The log tells how many conversions ran.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from host.model.cache import prepare_model
from host.model.pins import pins_of

REPO = Path(__file__).resolve().parents[3]

_FILLER = """
import os, sys, time
from pathlib import Path
from host.model.cache import prepare_model
from host.model.pins import pins_of
source, root, log = (Path(arg) for arg in sys.argv[1:4])
delay = float(sys.argv[4])
def progress(name):
    with log.open("a") as handle:
        handle.write(f"{os.getpid()} {name}\\n")
    time.sleep(delay)
print("ready", flush=True)
sys.stdin.readline()
result = prepare_model(source, pins_of(source), "f32", cache_root=root, progress=progress)
print(result.provenance, result.sha256, flush=True)
"""


def _filler(
    source: Path, root: Path, log: Path, delay: float, new_session: bool = False
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _FILLER, str(source), str(root), str(log), str(delay)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _converters(log: Path) -> set[str]:
    if not log.exists():
        return set()
    return {line.split()[0] for line in log.read_text().splitlines()}


def test_two_processes_started_together_convert_once(tmp_path: Path, tiny_dir: Path) -> None:
    """Mutation control: make `receipts.staging.fill_lock` a no-op and both convert (the
    second then fails on the taken target): this test fails."""
    root, log = tmp_path / "cache", tmp_path / "progress.log"
    procs = [_filler(tiny_dir, root, log, 0.05) for _ in range(2)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    lines = sorted(out.split() for out, _ in results)
    assert [line[0] for line in lines] == ["adopted_from_cache", "built_by_this_run"]
    assert lines[0][1] == lines[1][1]  # the same GGUF
    assert len(_converters(log)) == 1  # exactly one conversion
    waiter = next(err for out, err in results if out.startswith("adopted"))
    assert "waiting for another process filling a converted model" in waiter
    assert not [p for p in root.iterdir() if ".staging" in p.name]


def test_a_killed_converters_staging_is_removed_by_the_next(tmp_path: Path, tiny_dir: Path) -> None:
    root, log = tmp_path / "cache", tmp_path / "progress.log"
    dead = _filler(tiny_dir, root, log, 60.0, new_session=True)
    assert dead.stdin is not None
    dead.stdin.write("go\n")
    dead.stdin.flush()
    deadline = time.monotonic() + 60
    while not _converters(log):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    staging = [p for p in root.iterdir() if ".staging-" in p.name]
    assert len(staging) == 1 and any(staging[0].rglob("model.gguf"))  # a partial GGUF
    os.killpg(dead.pid, signal.SIGKILL)
    dead.communicate(timeout=30)
    assert staging[0].is_dir()  # SIGKILL left it behind
    result = prepare_model(tiny_dir, pins_of(tiny_dir), "f32", cache_root=root)
    assert result.provenance == "built_by_this_run"
    assert not staging[0].exists()
    assert sorted(p.name for p in root.iterdir()) == [f".{result.key}.lock", result.key]
