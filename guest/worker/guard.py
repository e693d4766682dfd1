"""Per-request watchdog: memory headroom every <= 50 ms, and the wall deadline.

Why a thread and not a check between tokens: a long prompt is one `llama_decode` call
that can run for seconds; only llama.cpp's abort callback can stop it, and something
outside that call has to decide to. The watchdog decides; `Cancel` carries the reason;
the abort callback reads it.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Final, Literal

import llama_cpp

from guest.worker.memory import HeadroomReader, HeadroomUnread

CancelReason = Literal["deadline", "client", "shutdown", "memory_pressure"]

SAMPLE_INTERVAL_S = 0.025

ABORT_CALLBACK: Final = ctypes.cast(ctypes.CDLL(None).strlen, llama_cpp.ggml_abort_callback)
"""llama.cpp's abort callback, in C: libc `strlen` of a `Cancel.flag`.

ggml calls the abort callback after every graph node (about 50 times per token for a
2-layer model). A Python callback costs a GIL round trip each time and waits for the
GIL whenever the watchdog holds it: measured 0.07-0.2 ms per token, a 20-50% slowdown
of a fast model. `strlen` reads the flag without Python: 0 (false, go on) while it is
empty, 1 (true, abort) once `Cancel.set` wrote its byte. The flag never holds more than
one byte, so the `size_t` result is always 0 or 1, which the C `bool` return reads the
same on x86-64 and arm64.
"""


class Cancel:
    """First reason wins; setting it is cheap and safe from any thread.

    `flag` is a NUL-terminated byte string that llama.cpp's abort callback reads
    without Python (see engine.ABORT_CALLBACK): empty until the first `set`, then
    one byte long. The reason is stored before the flag is raised, so whoever sees
    the flag sees the reason.
    """

    def __init__(self) -> None:
        self.reason: CancelReason | None = None
        self.flag = ctypes.create_string_buffer(2)
        self._lock = threading.Lock()

    def set(self, reason: CancelReason) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
                self.flag[0] = b"\x01"

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
