"""Capture llama.cpp's log and turn load failures into closed categories.

llama-cpp-python reports every load failure as "Failed to load model"; the reason is
only in llama.cpp's log. The log is text that may quote file contents, so it is never
forwarded to our logs or records: a bounded ring of recent lines is kept in memory and
read only by `classify_load_failure`, which answers with a category.
"""

from __future__ import annotations

import ctypes
import threading
from collections import deque
from typing import Final, Literal

import llama_cpp

LoadFailure = Literal["model_load_failed", "model_load_out_of_memory", "model_file_unreadable"]

_MAX_LINES: Final = 256
_MAX_LINE_CHARS: Final = 512

# Substrings of llama.cpp/ggml log lines (lower-cased) -> category. Checked in order.
_PATTERNS: Final[tuple[tuple[str, LoadFailure], ...]] = (
    ("failed to allocate", "model_load_out_of_memory"),
    ("unable to allocate", "model_load_out_of_memory"),
    ("out of memory", "model_load_out_of_memory"),
    ("cannot allocate memory", "model_load_out_of_memory"),
    ("failed to open", "model_file_unreadable"),
    ("no such file", "model_file_unreadable"),
    ("permission denied", "model_file_unreadable"),
    ("failed to read", "model_file_unreadable"),
)


class LlamaLog:
    """The process-wide llama.cpp log sink (llama_log_set is global, so one instance)."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=_MAX_LINES)
        self._partial = ""
        self._lock = threading.Lock()
        # Keep a reference: ctypes frees the trampoline when the object is collected.
        self._callback = llama_cpp.llama_log_callback(self._on_log)

    def install(self) -> None:
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def _on_log(self, _level: int, text: bytes | None, _user: ctypes.c_void_p) -> None:
        if not text:
            return
        chunk = text.decode("utf-8", errors="replace")
        with self._lock:
            data = self._partial + chunk
            *complete, self._partial = data.split("\n")
            self._partial = self._partial[-_MAX_LINE_CHARS:]
            for line in complete:
                self._lines.append(line[:_MAX_LINE_CHARS])

    def mark(self) -> int:
        """A position to read from later (lines appended after this call)."""
        with self._lock:
            self._lines.clear()
            self._partial = ""
            return 0

    def lines(self) -> list[str]:
        with self._lock:
            return [*self._lines, self._partial] if self._partial else list(self._lines)


def classify_load_failure(lines: list[str]) -> LoadFailure:
    """The category that llama.cpp's log supports, `model_load_failed` if none matches."""
    lowered = [line.lower() for line in lines]
    for needle, category in _PATTERNS:
        if any(needle in line for line in lowered):
            return category
    return "model_load_failed"


LOG: Final = LlamaLog()
"""The one sink; `install()` it before the first model load."""
