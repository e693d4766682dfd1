"""A cancelled trial's blocking work stops within a second (host/cancel.py).

Real work on real files: an 8 GiB sparse file takes seconds to hash, so a cancel
0.3 s in lands mid-hash and the loop must raise `Cancelled` long before the end.
For conversion and GGUF verification of the tiny model, which finish in
milliseconds, the cancel is made from inside the work (the progress reporter's
`advance`, called after each piece), so it lands between two pieces every time.

Mutation controls (each removed, its test run, seen to fail, restored): the
`cancel.check()` in pins.sha256_file, image/digest.sha256_file,
verify_gguf.HashingReader._hash, convert's hashing sink, and the token test in
cancel.communicate.
"""

from __future__ import annotations

import asyncio
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from host import cancel, wheels
from host.image.digest import sha256_file as image_sha256_file
from host.image.errors import ImageError
from host.image.tools import run_tool
from host.model import progress
from host.model.convert import convert, plan_conversion, write_gguf
from host.model.pins import sha256_file as pins_sha256_file
from host.model.verify_gguf import verify_gguf
from host.runtime import _unpack
from host.wheelfetch import download_wheels

BIG = 8 << 30
CANCEL_AFTER_S = 0.3
NOTICE_S = 1.0
"""The bound the trial promises: long loops notice a cancel within a second."""


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 GiB of zeros, sparse: seconds to read and hash, no disk used."""
    path = tmp_path_factory.mktemp("big") / "weights.bin"
    with path.open("wb") as handle:
        handle.truncate(BIG)
    return path


def _cancel_later(token: cancel.CancelToken, after_s: float) -> threading.Timer:
    timer = threading.Timer(after_s, token.cancel)
    timer.start()
    return timer


@pytest.mark.parametrize(
    "hash_file",
    [pins_sha256_file, image_sha256_file],
    ids=["model_pins", "image_digest"],
)
def test_hashing_a_large_file_stops_within_a_second_of_a_cancel(
    hash_file: Callable[[Path], object], big_file: Path
) -> None:
    token = cancel.CancelToken()
    started = time.monotonic()
    with cancel.cancel_scope(token):
        _cancel_later(token, CANCEL_AFTER_S)
        with pytest.raises(cancel.Cancelled):
            hash_file(big_file)
    took = time.monotonic() - started
    assert took < CANCEL_AFTER_S + NOTICE_S, took


def test_the_same_hash_runs_to_its_end_without_a_cancel(big_file: Path, tmp_path: Path) -> None:
    """The control: outside a trial's scope the token is never cancelled, and the loop
    that the test above stops takes far longer than its bound (so the bound means
    something). A 1 GiB slice keeps this short."""
    slice_ = tmp_path / "slice.bin"
    with slice_.open("wb") as handle:
        handle.truncate(1 << 30)
    digest, size = pins_sha256_file(slice_)
    assert size == 1 << 30 and len(digest) == 64


class _CancelOnAdvance(progress.NullReporter):
    """Cancels the token after the first piece of work is reported done."""

    def __init__(self, token: cancel.CancelToken) -> None:
        self.token = token
        self.advanced = 0

    def advance(self, nbytes: int) -> None:
        self.advanced += 1
        self.token.cancel()


@pytest.fixture
def cancel_on_advance() -> Iterator[_CancelOnAdvance]:
    token = cancel.CancelToken()
    reporter = _CancelOnAdvance(token)
    reset = progress._CURRENT.set(reporter)
    try:
        with cancel.cancel_scope(token):
            yield reporter
    finally:
        progress._CURRENT.reset(reset)


def test_conversion_stops_at_the_next_write_after_a_cancel(
    tiny_dir: Path, tmp_path: Path, cancel_on_advance: _CancelOnAdvance
) -> None:
    plan = plan_conversion(tiny_dir, "bf16")
    assert len(plan.tensors) > 2  # more than one piece: the cancel lands between two
    with pytest.raises(cancel.Cancelled):
        write_gguf(plan, tmp_path / "out.gguf")
    assert cancel_on_advance.advanced == 1


def test_gguf_verification_stops_at_the_next_read_after_a_cancel(
    tiny_dir: Path, tmp_path: Path
) -> None:
    gguf_path = convert(tiny_dir, tmp_path / "out", "q8_0").path
    token = cancel.CancelToken()
    reporter = _CancelOnAdvance(token)
    reset = progress._CURRENT.set(reporter)
    try:
        with cancel.cancel_scope(token), pytest.raises(cancel.Cancelled):
            verify_gguf(gguf_path, tiny_dir, "q8_0")
    finally:
        progress._CURRENT.reset(reset)
    assert reporter.advanced == 1


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_build_tool_is_killed_within_a_second_of_a_cancel(tmp_path: Path) -> None:
    token = cancel.CancelToken()
    marker = tmp_path / "pid"
    started = time.monotonic()
    with cancel.cancel_scope(token):
        _cancel_later(token, CANCEL_AFTER_S)
        with pytest.raises(cancel.Cancelled):
            run_tool(  # a tool with a child of its own, as mmdebstrap runs apt
                ["sh", "-c", f"sleep 30 & echo $! > {marker}; wait"],
                category="build_failed",
                step="kernel",
            )
    assert time.monotonic() - started < CANCEL_AFTER_S + NOTICE_S
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + NOTICE_S
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)  # killed; its parent (PID 1 here) reaps it
    assert not _alive(grandchild), "the tool's own child outlived the cancel"


def test_a_build_tool_that_fails_is_still_a_closed_category() -> None:
    """The control for the test above: a tool's own failure keeps its category."""
    with pytest.raises(ImageError) as info:
        run_tool(["sh", "-c", "exit 3"], category="build_failed", step="kernel")
    assert info.value.category == "build_failed"


def test_cancelling_a_task_waits_for_its_thread_to_stop(big_file: Path) -> None:
    """`in_thread`: the awaiting task's cancel reaches the thread through the token, and
    the CancelledError comes only once the thread has stopped (so teardown never races
    a thread still writing). Plain `asyncio.to_thread` would return at once."""
    finished: list[float] = []

    def work() -> None:
        try:
            pins_sha256_file(big_file)
        finally:
            finished.append(time.monotonic())

    async def main() -> float:
        token = cancel.CancelToken()
        with cancel.cancel_scope(token):
            task = asyncio.ensure_future(cancel.in_thread(work))
            await asyncio.sleep(CANCEL_AFTER_S)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic()

    started = time.monotonic()
    returned = asyncio.run(main())
    assert finished and finished[0] <= returned  # the thread ended before the await did
    assert returned - started < CANCEL_AFTER_S + NOTICE_S


def test_unpacking_a_runtime_wheel_stops_after_a_cancel(tmp_path: Path) -> None:
    """The guest runtime build (host/runtime.py) checks the token between members."""
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for index in range(3):
            archive.writestr(f"demo/module{index}.py", "x = 1\n")
    token = cancel.CancelToken()
    token.cancel()
    with cancel.cancel_scope(token), pytest.raises(cancel.Cancelled):
        _unpack(wheel, tmp_path / "site")
    assert not (tmp_path / "site").exists()  # not one member written
    _unpack(wheel, tmp_path / "site")  # the control: outside a cancelled scope it unpacks
    assert len(list((tmp_path / "site" / "demo").iterdir())) == 3


def test_a_wheel_fetch_is_killed_after_a_cancel(tmp_path: Path) -> None:
    """pip (host/wheelfetch.py) runs under cancel.communicate: killed, not waited for."""
    token = cancel.CancelToken()
    token.cancel()
    started = time.monotonic()
    with cancel.cancel_scope(token), pytest.raises(cancel.Cancelled):
        download_wheels(["harness-no-such-distribution==0.0.0"], tmp_path)
    assert time.monotonic() - started < NOTICE_S


def test_the_llama_wheel_download_is_killed_after_a_cancel(tmp_path: Path) -> None:
    """host/wheels.py's pip steps (download, the minutes-long build) run under
    cancel.communicate too."""
    token = cancel.CancelToken()
    token.cancel()
    started = time.monotonic()
    with cancel.cancel_scope(token), pytest.raises(cancel.Cancelled):
        wheels._download_sdist(tmp_path)
    assert time.monotonic() - started < NOTICE_S
