"""What a trial is doing right now: stage, elapsed time, and the deadline it runs under.

The pipeline reports every stage's start and end to a `ProgressSink`. On a terminal
the CLI shows them live (rich), so an operator watching a 10-minute trial sees which
stage is running and how close it is to its deadline; otherwise nothing is drawn and
the structured log is the only output. The same events give the benchmark its
per-stage wall times (`StageTimer`), so the split it reports is the pipeline's own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal, Protocol

import structlog
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from receipts.records.trial import Stage

TrialStep = Stage | Literal["teardown", "bundle"]
"""A pipeline stage, or `teardown` / `bundle`, which have no stage record of their own."""


class ProgressSink(Protocol):
    def begin(self, step: TrialStep, deadline_s: float | None) -> None: ...

    def end(self, step: TrialStep, ok: bool) -> None: ...


class NoProgress:
    """Draws nothing (not a terminal, or `--json`)."""

    def begin(self, step: TrialStep, deadline_s: float | None) -> None:
        return None

    def end(self, step: TrialStep, ok: bool) -> None:
        return None


@dataclass
class StepTiming:
    step: TrialStep
    started: float
    deadline_s: float | None
    ended: float | None = None
    ok: bool | None = None

    def elapsed(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started


@dataclass
class StageTimer:
    """Records each step's monotonic start and end, for benchmarks and the live view."""

    steps: list[StepTiming] = field(default_factory=list)

    def begin(self, step: TrialStep, deadline_s: float | None) -> None:
        self.steps.append(StepTiming(step, time.monotonic(), deadline_s))

    def end(self, step: TrialStep, ok: bool) -> None:
        for timing in reversed(self.steps):
            if timing.step == step and timing.ended is None:
                timing.ended, timing.ok = time.monotonic(), ok
                return

    def seconds(self) -> dict[str, float]:
        """Wall seconds per finished step, in the order they ran."""
        return {str(t.step): t.ended - t.started for t in self.steps if t.ended is not None}


def _mark(timing: StepTiming) -> Text:
    if timing.ended is None:
        return Text("running", style="bold cyan")
    return Text("ok", style="green") if timing.ok else Text("failed", style="bold red")


def render(timer: StageTimer, started: float, now: float) -> Table:
    """The live table: one row per step so far, plus the trial's total elapsed time."""
    table = Table(title=f"harness trial  {now - started:6.1f} s", title_justify="left")
    table.add_column("stage")
    table.add_column("state")
    table.add_column("elapsed", justify="right")
    table.add_column("deadline", justify="right")
    for timing in timer.steps:
        deadline = f"{timing.deadline_s:.0f} s" if timing.deadline_s is not None else "-"
        table.add_row(str(timing.step), _mark(timing), f"{timing.elapsed(now):.1f} s", deadline)
    return table


class LiveProgress:
    """A rich Live table on stderr, refreshed four times a second while the trial runs."""

    def __init__(self, console: Console | None = None) -> None:
        self.timer = StageTimer()
        self.started = time.monotonic()
        self.console = console or Console(stderr=True)
        self.live = Live(
            console=self.console,
            refresh_per_second=4,
            transient=False,
            get_renderable=self._table,
        )

    def _table(self) -> Table:
        return render(self.timer, self.started, time.monotonic())

    def __enter__(self) -> LiveProgress:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.refresh()
        self.live.stop()

    def begin(self, step: TrialStep, deadline_s: float | None) -> None:
        self.timer.begin(step, deadline_s)

    def end(self, step: TrialStep, ok: bool) -> None:
        self.timer.end(step, ok)


class LogProgress:
    """Each step's start and end as a structured log line (info level), for when nothing
    is drawn: an operator reading CI output, or a test that must act while a given stage
    runs (tests/harness/trial/test_signal_trial_vm.py), sees where the trial is."""

    def __init__(self) -> None:
        self.log = structlog.get_logger("harness.trial")

    def begin(self, step: TrialStep, deadline_s: float | None) -> None:
        self.log.info("stage_begin", stage=str(step))

    def end(self, step: TrialStep, ok: bool) -> None:
        self.log.info("stage_end", stage=str(step), outcome="ok" if ok else "failed")
