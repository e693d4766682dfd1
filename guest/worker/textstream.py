"""Streamed text deltas, and OpenAI `stop` strings.

Why deltas are held back: a delta that reached the client cannot be taken back. While
the output may still become a tool call (it is a prefix of `<tool_call>`), or its end
may be the start of a stop string, those bytes wait for the next token to decide. A
stop string, once complete, is cut together with everything after it, so no part of it
is ever sent or returned.

Matching is on UTF-8 bytes, which finds exactly the matches a search on the decoded
text would: UTF-8 is self-synchronising, a valid encoded string never matches from the
middle of a character.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from guest.worker.toolgrammar import CALL_OPEN

_OPEN = CALL_OPEN.encode()


class StopStrings:
    """The request's stop strings (at most 4, each non-empty) as UTF-8 bytes."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s.encode("utf-8") for s in stops if s)
        self._longest = max((len(s) for s in self._stops), default=0)
        self._firsts = frozenset(s[0] for s in self._stops)

    def __bool__(self) -> bool:
        return bool(self._stops)

    def find(self, out: bytearray, grown_from: int) -> int | None:
        """Where the earliest stop string in *out* starts, or None.

        Only matches that end after `out[:grown_from]` are looked for: the caller asked
        before each growth, so any earlier match would have ended generation then.
        """
        start = max(0, grown_from - self._longest + 1)
        hits = [i for stop in self._stops if (i := out.find(stop, start)) >= 0]
        return min(hits) if hits else None

    def pending(self, out: bytearray) -> int:
        """Length of the longest tail of *out* that could still grow into a stop string."""
        for k in range(min(self._longest - 1, len(out)), 0, -1):
            if out[-k] in self._firsts:
                tail = bytes(out[-k:])
                if any(stop.startswith(tail) for stop in self._stops):
                    return k
        return 0


def may_be_call(out: bytearray) -> bool:
    """The output is `<tool_call>`..., or a prefix of it that a next token may complete."""
    return out.startswith(_OPEN) or (len(out) < len(_OPEN) and _OPEN.startswith(out))


class TextStreamer:
    """Sends text deltas as they become certain (see the module docstring)."""

    def __init__(
        self, sink: Callable[[str], None] | None, tagged: bool, stops: StopStrings
    ) -> None:
        self._sink = sink
        self._tagged = tagged
        self._stops = stops
        self._sent = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, out: bytearray) -> None:
        if self._sink is None or (self._tagged and may_be_call(out)):
            return
        end = len(out) - self._stops.pending(out)
        if end > self._sent:
            text = self._decoder.decode(bytes(out[self._sent : end]))
            self._sent = end
            if text:
                self._sink(text)

    def flush(self, out: bytearray) -> None:
        """Send the rest of a final text answer (*out* already cut at a stop string)."""
        if self._sink is None or out.startswith(_OPEN):
            return
        text = self._decoder.decode(bytes(out[self._sent :]), final=True)
        self._sent = len(out)
        if text:
            self._sink(text)
