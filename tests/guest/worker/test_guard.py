"""The worker's per-request watchdog (guest/worker/guard.py), without a model.

The engine's tests reach the watchdog only through a whole generation, where a slip in
one comparison (the guard at exactly its bound, the first of two reasons, the deadline
at exactly now) is hidden by timing. Here each sample is taken by hand against a
reader that returns chosen figures, and the abort flag is read the way llama.cpp reads
it: by calling the C callback on the flag's address.
"""

from __future__ import annotations

import ctypes
import threading
import time

import pytest

from guest.worker.guard import ABORT_CALLBACK, SAMPLE_INTERVAL_S, Cancel, Watchdog
from guest.worker.memory import Headroom, HeadroomUnread

GUARD = 1000


class _Figures:
    """A headroom reader that returns the given figures in turn (then the last again);
    `None` stands for a figure that could not be read."""

    def __init__(self, *figures: int | None) -> None:
        self._figures = list(figures)
        self.reads = 0

    def read(self) -> Headroom:
        figure = self._figures[min(self.reads, len(self._figures) - 1)]
        self.reads += 1
        if figure is None:
            raise HeadroomUnread("test: unreadable")
        return Headroom(figure, "self")


def _watchdog(reader: _Figures, *, deadline: float | None = None) -> tuple[Cancel, Watchdog]:
    cancel = Cancel()
    far = time.monotonic() + 3600 if deadline is None else deadline
    return cancel, Watchdog(cancel, reader, GUARD, far)  # type: ignore[arg-type]


def _callback_says_abort(cancel: Cancel) -> bool:
    """What llama.cpp's abort callback answers for this flag (C `bool`)."""
    return bool(ABORT_CALLBACK(ctypes.cast(cancel.flag, ctypes.c_void_p)))


def test_a_new_cancel_is_unset_and_the_callback_says_go_on() -> None:
    cancel = Cancel()
    assert cancel.reason is None
    assert not cancel
    assert not _callback_says_abort(cancel)


def test_the_first_reason_wins_and_raises_the_flag_once() -> None:
    cancel = Cancel()
    cancel.set("client")
    cancel.set("deadline")
    assert cancel.reason == "client"
    assert cancel
    assert cancel.flag.raw == b"\x01\x00"
    assert _callback_says_abort(cancel)


def test_headroom_above_the_guard_does_not_trip() -> None:
    cancel, watchdog = _watchdog(_Figures(GUARD + 1))
    watchdog.sample()
    assert cancel.reason is None
    assert watchdog.samples == 1
    assert watchdog.min_headroom == GUARD + 1


def test_headroom_exactly_at_the_guard_does_not_trip_and_one_byte_under_does() -> None:
    cancel, watchdog = _watchdog(_Figures(GUARD, GUARD - 1))
    watchdog.sample()
    assert cancel.reason is None
    watchdog.sample()
    assert cancel.reason == "memory_pressure"
    assert _callback_says_abort(cancel)


def test_the_lowest_headroom_seen_is_kept_and_ties_change_nothing() -> None:
    cancel, watchdog = _watchdog(_Figures(5000, 3000, 3000, 4000))
    for _ in range(4):
        watchdog.sample()
    assert watchdog.min_headroom == 3000
    assert watchdog.samples == 4
    assert cancel.reason is None


def test_an_unreadable_headroom_trips_the_guard_and_is_not_a_sample() -> None:
    cancel, watchdog = _watchdog(_Figures(None))
    watchdog.sample()
    assert cancel.reason == "memory_pressure"
    assert watchdog.samples == 0
    assert watchdog.min_headroom is None


def test_a_passed_deadline_is_the_reason_even_when_headroom_is_short_too() -> None:
    cancel, watchdog = _watchdog(_Figures(GUARD - 1), deadline=time.monotonic() - 1)
    watchdog.sample()
    assert cancel.reason == "deadline"
    # The figure is still read and kept: the receipt's lowest headroom includes it.
    assert watchdog.min_headroom == GUARD - 1


def test_a_deadline_of_exactly_now_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1000.0
    monkeypatch.setattr("guest.worker.guard.time.monotonic", lambda: now)
    cancel, watchdog = _watchdog(_Figures(GUARD + 1), deadline=now)
    watchdog.sample()
    assert cancel.reason == "deadline"
    cancel, watchdog = _watchdog(_Figures(GUARD + 1), deadline=now + 0.001)
    watchdog.sample()
    assert cancel.reason is None


def test_the_thread_samples_until_stopped_then_ends() -> None:
    reader = _Figures(GUARD + 1)
    cancel, watchdog = _watchdog(reader)
    assert watchdog.daemon
    watchdog.start()
    waited = time.monotonic() + 10
    while reader.reads < 3 and time.monotonic() < waited:
        time.sleep(SAMPLE_INTERVAL_S)
    watchdog.stop()
    assert not watchdog.is_alive()
    assert reader.reads >= 3
    settled = reader.reads
    time.sleep(4 * SAMPLE_INTERVAL_S)
    assert reader.reads == settled
    assert cancel.reason is None


def test_the_thread_trips_the_cancel_while_a_request_runs() -> None:
    cancel, watchdog = _watchdog(_Figures(GUARD + 1, GUARD + 1, GUARD - 1))
    watchdog.start()
    waited = time.monotonic() + 10
    while not cancel and time.monotonic() < waited:
        time.sleep(SAMPLE_INTERVAL_S)
    watchdog.stop()
    assert cancel.reason == "memory_pressure"


def test_the_thread_waits_the_sample_interval_between_samples() -> None:
    """The worker's contract is a headroom reading at least every 50 ms of a request.
    The interval is the wait between samples (a lower bound on their spacing, so this
    holds on a loaded machine too: a starved thread samples less often, never more)."""
    assert 0 < SAMPLE_INTERVAL_S <= 0.05
    reader = _Figures(GUARD + 1)
    _cancel, watchdog = _watchdog(reader)
    started = time.monotonic()
    watchdog.start()
    waited = started + 10
    while reader.reads < 1 and time.monotonic() < waited:
        time.sleep(0.01)
    time.sleep(0.2)
    watchdog.stop()
    elapsed = time.monotonic() - started
    assert 1 <= reader.reads <= elapsed / SAMPLE_INTERVAL_S + 1


def test_set_from_many_threads_keeps_exactly_one_reason() -> None:
    cancel = Cancel()
    reasons = ("deadline", "client", "shutdown", "memory_pressure") * 8
    barrier = threading.Barrier(len(reasons))

    def race(reason: str) -> None:
        barrier.wait()
        cancel.set(reason)  # type: ignore[arg-type]

    threads = [threading.Thread(target=race, args=(reason,)) for reason in reasons]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cancel.reason in set(reasons)
    assert cancel.flag.raw == b"\x01\x00"
