"""How a finished command is named (`_exit_category`), how the child's namespace
report is read and judged (`_read_mark`, `_judge`), and the deadline in both waits.

Why exact cases: the category is what the model and the receipt see. A SIGKILL is a
CPU-limit kill only when the command had used its whole CPU budget (the kernel sends
SIGKILL one second after SIGXCPU); any other SIGKILL, and any other signal whatever its
CPU use, is a plain `signaled`. Mislabelling either way tells the model the wrong
thing about why its tests stopped. A deadline of exactly now has passed, in both waits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.tools import confine
from guest.tools.confine import _exit_category, _judge, _read_mark, _wait_unreaped

KILL = -int(signal.SIGKILL)
TERM = -int(signal.SIGTERM)


def test_a_kill_after_the_whole_cpu_budget_is_a_cpu_limit() -> None:
    assert _exit_category(KILL, False, cpu_used=2.5, cpu_cap=2) == "cpu_limit"


def test_a_kill_at_exactly_the_cpu_budget_is_a_cpu_limit() -> None:
    assert _exit_category(KILL, False, cpu_used=2.0, cpu_cap=2) == "cpu_limit"


def test_a_kill_below_the_cpu_budget_is_a_signal() -> None:
    assert _exit_category(KILL, False, cpu_used=1.99, cpu_cap=2) == "signaled"


def test_another_signal_after_the_cpu_budget_is_still_a_signal() -> None:
    assert _exit_category(TERM, False, cpu_used=5.0, cpu_cap=2) == "signaled"


def test_sigxcpu_and_sigxfsz_are_named_whatever_the_cpu_use() -> None:
    assert _exit_category(-int(signal.SIGXCPU), False, 0.0, 2) == "cpu_limit"
    assert _exit_category(-int(signal.SIGXFSZ), False, 0.0, 2) == "file_size_limit"


def test_exit_statuses_and_the_deadline() -> None:
    assert _exit_category(0, False, 0.0, 2) == "passed"
    assert _exit_category(1, False, 0.0, 2) == "failed"
    assert _exit_category(0, True, 0.0, 2) == "deadline"  # the deadline wins


class _FrozenClock:
    """A clock stopped at `now`; reading it more than `reads` times means the caller
    kept polling at a deadline that had already come."""

    def __init__(self, now: float, reads: int) -> None:
        self.now = now
        self.left = reads

    def monotonic(self) -> float:
        if self.left == 0:
            raise AssertionError("still waiting at a deadline that has come")
        self.left -= 1
        return self.now

    @staticmethod
    def sleep(seconds: float) -> None:
        del seconds


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_deadline_of_exactly_now_has_passed(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At `remaining == 0` the wait ends as timed out; it does not poll once more."""
    monkeypatch.setattr(confine, "time", _FrozenClock(100.0, reads=3))
    assert _wait_unreaped(sleeper.pid, deadline=100.0) is True


@pytest.fixture
def marked_pipe() -> Iterator[int]:
    """A pipe holding a child's namespace report, its write end closed (the child exec'd)."""
    r, w = os.pipe()
    os.write(w, b"ok:net:[4026532000]")
    os.close(w)
    try:
        yield r
    finally:
        os.close(r)


def test_a_mark_is_read_before_the_deadline(marked_pipe: int) -> None:
    assert _read_mark(marked_pipe, deadline=time.monotonic() + 30) == "net:[4026532000]"


def test_a_mark_is_not_read_at_a_deadline_of_exactly_now(
    marked_pipe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At `remaining == 0` the read gives up, even with the report already waiting."""
    monkeypatch.setattr(confine, "time", _FrozenClock(100.0, reads=3))
    assert _read_mark(marked_pipe, deadline=100.0) is None


def test_a_mark_is_read_up_to_its_bound_and_no_further() -> None:
    """A child's report is bounded (256 bytes, prefix included): a longer one is cut
    there, and the read stops at the bound without waiting for the child's exec."""
    r, w = os.pipe()
    try:
        os.write(w, b"ok:" + b"x" * 297)
        assert _read_mark(r, deadline=time.monotonic() + 30) == "x" * 253
    finally:
        os.close(r)
        os.close(w)


def test_a_command_ending_with_under_a_second_left_is_not_timed_out() -> None:
    proc = subprocess.Popen(["sleep", "0.1"])
    try:
        assert _wait_unreaped(proc.pid, deadline=time.monotonic() + 0.9) is False
    finally:
        proc.wait()


def test_a_mark_is_read_at_eof_without_waiting_for_the_deadline(
    marked_pipe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clock reads (one per chunk, the report and then EOF), far from the deadline."""
    monkeypatch.setattr(confine, "time", _FrozenClock(100.0, reads=2))
    assert _read_mark(marked_pipe, deadline=130.0) == "net:[4026532000]"


def test_a_mark_is_read_with_under_a_second_left(
    marked_pipe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "time", _FrozenClock(100.0, reads=2))
    assert _read_mark(marked_pipe, deadline=100.5) == "net:[4026532000]"


def test_a_mark_written_in_pieces_is_read_whole() -> None:
    r, w = os.pipe()

    def child() -> None:
        os.write(w, b"ok:")
        time.sleep(0.05)
        os.write(w, b"net:[4026532000]")
        os.close(w)

    writer = threading.Thread(target=child)
    writer.start()
    try:
        assert _read_mark(r, deadline=time.monotonic() + 30) == "net:[4026532000]"
    finally:
        writer.join()
        os.close(r)


def test_a_mark_without_its_prefix_is_no_mark() -> None:
    r, w = os.pipe()
    os.write(w, b"net:[4026532000]")
    os.close(w)
    try:
        assert _read_mark(r, deadline=time.monotonic() + 30) is None
    finally:
        os.close(r)


@pytest.mark.parametrize(
    ("mark", "ours", "judged"),
    [
        (None, "net:[1]", "not_applied"),  # the child reported nothing: nothing worked
        (None, None, "not_applied"),
        ("", "net:[1]", "unread"),  # unshared, but the child could not read its link
        ("net:[2]", None, "unread"),  # we could not read ours: nothing to compare
        ("net:[2]", "net:[1]", "applied"),
        ("net:[1]", "net:[1]", "not_applied"),  # unshare claimed success, same namespace
    ],
)
def test_isolation_is_judged_by_comparing_namespaces(
    mark: str | None, ours: str | None, judged: str
) -> None:
    assert _judge(mark, ours) == judged


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_an_error_while_waiting_still_ends_the_command_and_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever stops the wait (here an error from it; an interrupt alike), the command
    and the process it left in the background are killed and the command reaped before
    the error goes on: no call's processes outlive it. Mutation control: without the
    kill on that path the error arrives only when the sleeps end (600 s)."""
    pidfile = tmp_path / "bg"
    script = f"sleep 600 & echo $! > {pidfile}; exec sleep 600"
    started: list[int] = []

    def failing_wait(pid: int, deadline: float) -> bool:
        started.append(pid)
        for _ in range(500):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            time.sleep(0.01)
        raise RuntimeError("the wait failed")

    monkeypatch.setattr(confine, "_wait_unreaped", failing_wait)
    called = time.monotonic()
    with pytest.raises(RuntimeError, match="the wait failed") as info:
        confine.run_confined(
            ["/bin/sh", "-c", script],
            cwd=str(tmp_path),
            env={"PATH": "/usr/bin:/bin"},
            limits=confine.RunLimits(wall_seconds=30),
            net_policy="disabled",
        )
    assert time.monotonic() - called < 20  # not after the sleeps ended on their own
    assert info.traceback  # the failed call's frames (and its Popen) are still held here
    background = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(background) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(background)
    assert not Path(f"/proc/{started[0]}").exists()  # the command itself was reaped
