"""Bounded text for the model, with an exact count of what was left out.

Every tool's output passes through one of these so that no result can grow with
the size of the workspace or of a test's log, and so truncation is counted where
it happens (docs/engineering.md §12) instead of being inferred later.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def utf8_len(text: str) -> int:
    """Byte length of `text` as it goes to the model (lone surrogates count as 3)."""
    return len(text.encode("utf-8", "surrogatepass"))


def cut_utf8(text: str, cap_bytes: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding fits in `cap_bytes`."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= cap_bytes:
        return text
    return raw[:cap_bytes].decode("utf-8", "ignore")


@dataclass
class BoundedText:
    """Accumulates whole pieces (lines) up to a byte cap.

    A piece is kept whole or not at all, so the model never sees half a line.
    Every byte offered is counted, kept or not, so `omitted_bytes` is exact.
    """

    cap_bytes: int
    _parts: list[str] = field(default_factory=list)
    _kept: int = 0
    _offered: int = 0
    _full: bool = False
    _extra_omitted: int = 0
    _cut: bool = False

    def add(self, piece: str) -> bool:
        """Keep `piece` if it fits; once one piece does not fit, keep no more."""
        size = utf8_len(piece)
        self._offered += size
        if self._full or self._kept + size > self.cap_bytes:
            self._full = True
            return False
        self._parts.append(piece)
        self._kept += size
        return True

    def count_omitted(self, size: int) -> None:
        """Record bytes dropped before they were offered (e.g. a cut line's tail)."""
        self._extra_omitted += size
        if size > 0:
            self._cut = True

    def mark_incomplete(self) -> None:
        """Record that a scan stopped early, whether or not bytes were counted."""
        self._cut = True

    @property
    def full(self) -> bool:
        return self._full

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def omitted_bytes(self) -> int:
        return self._offered - self._kept + self._extra_omitted

    @property
    def truncated(self) -> bool:
        return self._full or self._cut or self.omitted_bytes > 0
