"""The live progress display: step events, what is drawn, and when it is drawn at all."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.commands import trial as trial_command
from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.pipeline import Trial
from harness.trial.progress import LiveProgress, LogProgress, StageTimer, render


def _trial(tmp_path: Path, timer: StageTimer) -> Trial:
    options = TrialOptions(
        profile=load_profile("tiny"), task="py-one-line-fix", script=None, out_dir=tmp_path
    )
    return Trial(options, progress=timer)


def test_steps_report_start_end_and_failure(tmp_path: Path) -> None:
    timer = StageTimer()
    trial = _trial(tmp_path, timer)
    with trial.step("preflight"):
        pass
    with pytest.raises(RuntimeError), trial.step("vm", 180.0):
        raise RuntimeError
    assert [(t.step, t.ok, t.deadline_s) for t in timer.steps] == [
        ("preflight", True, None),
        ("vm", False, 180.0),
    ]
    seconds = timer.seconds()
    assert list(seconds) == ["preflight", "vm"] and all(v >= 0 for v in seconds.values())


def test_the_table_shows_state_elapsed_and_deadline() -> None:
    timer = StageTimer()
    timer.begin("image", None)
    timer.end("image", True)
    timer.begin("vm", 180.0)
    timer.end("vm", False)
    timer.begin("teardown", None)
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(
        render(timer, timer.steps[0].started, timer.steps[0].started + 12.5)
    )
    text = out.getvalue()
    assert "12.5 s" in text
    rows = {line.split()[1]: line for line in text.splitlines() if line.startswith("│")}
    assert "ok" in rows["image"] and "failed" in rows["vm"] and "180 s" in rows["vm"]
    assert "running" in rows["teardown"]


@pytest.mark.parametrize(
    ("tty", "json_output", "live"),
    [(True, False, True), (False, False, False), (True, True, False)],
)
def test_drawn_only_on_a_terminal_and_never_with_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tty: bool, json_output: bool, live: bool
) -> None:
    seen: list[Any] = []

    async def fake_run_trial(options: TrialOptions, progress: Any = None) -> Any:
        seen.append(progress)
        raise SystemExit(0)

    class FakeStderr(io.StringIO):
        def isatty(self) -> bool:
            return tty

    monkeypatch.setattr(trial_command, "run_trial_with_signals", fake_run_trial)
    monkeypatch.setattr("sys.stderr", FakeStderr())
    args = argparse.Namespace(
        profile="tiny",
        task=None,
        agent="model",
        out=tmp_path,
        backend="qemu",
        accel="tcg",
        placement=None,
        guest_start="snapshot",
        dispatch=None,
        suite_member=None,
        sign_key=None,
        json=json_output,
    )
    with pytest.raises(SystemExit):
        trial_command.run(args)
    assert len(seen) == 1
    assert isinstance(seen[0], LiveProgress if live else LogProgress)
