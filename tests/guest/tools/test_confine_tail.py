"""The output tail the model is shown (`_Tail` drains it, `_tail_text` cuts it) and the
count of what it is not.

Why exact: `omitted_bytes` is 0 only when the model saw every byte; a tail that fits
is passed through unchanged (its last newline included); a cut tail starts at a whole
line, except when there is no line break to cut at, when the one partial line is all
there is to show. The drain keeps at most `tail_bytes` however much is written, so a
command's output never has to fit in memory.
"""

from __future__ import annotations

import itertools
import os

from guest.tools.confine import RunLimits, _Tail, _tail_text

THREE = RunLimits(tail_lines=3)


def test_exactly_as_many_lines_as_allowed_is_shown_whole() -> None:
    raw = b"a\nb\nc\n"
    assert _tail_text(raw, len(raw), THREE) == ("a\nb\nc\n", 0)


def test_one_line_more_than_allowed_keeps_the_last_lines() -> None:
    raw = b"a\nb\nc\nd\n"
    assert _tail_text(raw, len(raw), THREE) == ("b\nc\nd", 3)  # "a\n" and the last newline


def test_a_cut_tail_drops_its_partial_first_line_even_when_short() -> None:
    """Few lines, but bytes were dropped before them: the first kept line is partial,
    and every whole line after it is kept."""
    raw = b"xyz\nnext\nlast\n"
    assert _tail_text(raw, 100, THREE) == ("next\nlast", 91)


def test_a_cut_tail_with_no_line_break_is_kept_whole() -> None:
    raw = b"x" * 10
    assert _tail_text(raw, 25, THREE) == ("x" * 10, 15)


def test_a_cut_tail_of_undecodable_bytes_counts_the_bytes_not_shown() -> None:
    """Each undecodable byte is shown as U+FFFD (three bytes in UTF-8), but it is one
    byte of the output: the count is of output bytes, 25 - 14 here (two lines of 4 bytes
    and 3 newlines). Counting the shown text re-encoded reported 1 (fixed 2026-12-02)."""
    raw = b"\xff\xff\xff\xff\n" * 5
    text, omitted = _tail_text(raw, len(raw), THREE)
    assert text == "\n".join(["\ufffd" * 4] * 3)
    assert omitted == 11


def test_lines_end_at_line_feeds_only() -> None:
    """A carriage return is part of its line (shown, and counted): `tail_lines` counts
    LF-ended lines, as the test of whether the output fits does. Splitting on every
    Unicode line boundary dropped the CRs and over-counted the omitted bytes by one a
    line; a lone CR or form feed (a progress bar) split one line into several."""
    raw = b"a\r\nb\r\nc\r\nd\r\n"
    assert _tail_text(raw, len(raw), THREE) == ("b\r\nc\r\nd\r", 4)  # "a\r\n", last "\n"
    bar = b"0%\r50%\r100%\n" * 4
    assert _tail_text(bar, len(bar), THREE) == ("\n".join(["0%\r50%\r100%"] * 3), 13)


def test_the_drain_keeps_only_the_last_tail_bytes_and_counts_all() -> None:
    r, w = os.pipe()
    try:
        tail = _Tail(r, 256)
        for i in range(10):
            os.write(w, bytes([ord("a") + i]) * 99 + b"\n")
        os.close(w)
        raw = tail.finish(grace_s=5.0)
    finally:
        os.close(r)
    assert tail.total == 1000
    assert raw == (b"h" * 99 + b"\n")[-56:] + b"i" * 99 + b"\n" + b"j" * 99 + b"\n"
    assert _tail_text(raw, tail.total, RunLimits(tail_bytes=256)) == (
        "i" * 99 + "\n" + "j" * 99,
        801,
    )


def test_omitted_is_exactly_the_output_bytes_not_shown() -> None:
    """Over every output of up to 6 bytes from {a, LF, CR, 0xFF}, whole or the tail of a
    longer one, for 1 to 3 lines: what is shown is the output's last bytes (for ASCII,
    its text is a suffix of the output, less a last LF), `omitted` is the total less
    those bytes, and it is 0 exactly when everything was shown."""
    for size in range(7):
        for combo in itertools.product((b"a", b"\n", b"\r", b"\xff"), repeat=size):
            raw = b"".join(combo)
            for lines in (1, 2, 3):
                limits = RunLimits(tail_lines=lines)
                for total in (len(raw), len(raw) + 5):
                    text, omitted = _tail_text(raw, total, limits)
                    whole = total == len(raw) and raw.count(b"\n") <= lines
                    assert (omitted == 0) == whole, (raw, total, lines)
                    if b"\xff" not in raw and not whole:
                        shown = text.encode()
                        assert raw.endswith(shown) or raw.endswith(shown + b"\n"), raw
                        assert omitted == total - len(shown), (raw, total, lines)
