"""Per-request watchdog: memory headroom every <= 50 ms, and the wall deadline.

Why a thread and not a check between tokens: a long prompt is one `llama_decode` call
that can run for seconds; only llama.cpp's abort callback can stop it, and something
outside that call has to decide to. The watchdog decides; `Cancel` carries the reason;
the abort callback reads it.
"""

from __future__ import annotations

import threading
import time
from typing import Literal

from guest.worker.memory import HeadroomReader, HeadroomUnread

CancelReason = Literal["deadline", "client", "shutdown", "memory_pressure"]

SAMPLE_INTERVAL_S = 0.025


class Cancel:
    """First reason wins; setting it is cheap and safe from any thread."""

    def __init__(self) -> None:
        self.reason: CancelReason | None = None
        self._lock = threading.Lock()

    def set(self, reason: CancelReason) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason

    def __bool__(self) -> bool:
        return self.reason is not None


class Watchdog(threading.Thread):
    """Samples headroom and the clock until stopped; trips `cancel` when either fails.

    An unreadable headroom during generation trips the guard too (fail closed).
    """

    def __init__(
        self,
        cancel: Cancel,
        reader: HeadroomReader,
        guard_bytes: int,
        deadline: float,
        interval_s: float = SAMPLE_INTERVAL_S,
    ) -> None:
        super().__init__(name="worker-watchdog", daemon=True)
        self._cancel = cancel
        self._reader = reader
        self._guard = guard_bytes
        self._deadline = deadline
        self._interval = interval_s
        self._halt = threading.Event()
        self.min_headroom: int | None = None
        self.samples = 0

    def sample(self) -> None:
        if time.monotonic() >= self._deadline:
            self._cancel.set("deadline")
        try:
            value = self._reader.read().bytes
        except HeadroomUnread:
            self._cancel.set("memory_pressure")
            return
        self.samples += 1
        if self.min_headroom is None or value < self.min_headroom:
            self.min_headroom = value
        if value < self._guard:
            self._cancel.set("memory_pressure")

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            self.sample()

    def stop(self) -> None:
        self._halt.set()
        self.join()
