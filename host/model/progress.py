"""Progress of long model work (hashing, conversion): bars on a TTY, nothing otherwise.

Why: hashing or converting a real model takes minutes, and a person at a terminal
should see it move; but a log file or CI output must carry only structured logs
(receipts/log.py), never bar redraws. So the work reports through whatever reporter
is current (a no-op by default) and only :func:`progress_on` a stream that *is* a TTY
installs a ``rich`` progress display. The reporter lives in a context variable so
library code needs no extra parameters and concurrent callers do not mix bars.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


class Reporter(Protocol):
    """Receives the start, steps and end of one piece of work measured in bytes."""

    def begin(self, what: str, total: int) -> None:
        """A task named *what* of *total* bytes starts."""

    def advance(self, nbytes: int) -> None:
        """*nbytes* more are done."""

    def end(self) -> None:
        """The current task is finished (or abandoned)."""


class NullReporter:
    """Reports nothing: the default when no TTY asked for progress."""

    def begin(self, what: str, total: int) -> None:
        """Nothing to show."""

    def advance(self, nbytes: int) -> None:
        """Nothing to show."""

    def end(self) -> None:
        """Nothing to show."""


class RichReporter:
    """One ``rich`` bar per task, removed when the task ends."""

    def __init__(self, bars: Progress) -> None:
        self._bars = bars
        self._task: TaskID | None = None

    def begin(self, what: str, total: int) -> None:
        """Add a bar."""
        self._task = self._bars.add_task(what, total=total)

    def advance(self, nbytes: int) -> None:
        """Move the bar."""
        if self._task is not None:
            self._bars.advance(self._task, nbytes)

    def end(self) -> None:
        """Remove the bar."""
        if self._task is not None:
            self._bars.remove_task(self._task)
            self._task = None


_NULL = NullReporter()
_CURRENT: ContextVar[Reporter | None] = ContextVar("harness_model_progress", default=None)


def current() -> Reporter:
    """The reporter long work should report to."""
    return _CURRENT.get() or _NULL


def wants_bars(stream: TextIO) -> bool:
    """Bars only on a terminal: a file, pipe or closed stream gets none."""
    try:
        return stream.isatty()
    except (ValueError, OSError):
        return False


@contextmanager
def progress_on(stream: TextIO) -> Iterator[Reporter]:
    """Show progress bars on *stream* while the block runs, if it is a TTY."""
    if not wants_bars(stream):
        yield current()
        return
    console = Console(file=stream, force_terminal=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bars:
        reporter = RichReporter(bars)
        token = _CURRENT.set(reporter)
        try:
            yield reporter
        finally:
            _CURRENT.reset(token)
