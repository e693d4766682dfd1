"""Staging and fill locks between real processes (docs/engineering.md §5, §15).

A filler is a real child process: it enters `staged_directory`, writes into its staging
directory, says so on stdout, and sleeps until it is killed or told to finish. What we
check is what a second set-up on the same machine sees: a live filler's staging is left
alone, a SIGKILLed filler's is removed by the next, and `fill_lock` makes a second
filler wait, then adopt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from receipts.staging import (
    TargetExists,
    fill_lock,
    lock_path_for,
    staged_directory,
    staging_prefix,
)

REPO = Path(__file__).resolve().parents[2]

_FILLER = """
import sys, time
from pathlib import Path
from receipts.staging import staged_directory
target = Path(sys.argv[1])
with staged_directory(target) as content:
    (content / "made-by").write_text(sys.argv[2])
    print(content.parent, flush=True)
    sys.stdin.readline()  # finish when told (or die when killed)
print("done", flush=True)
"""


class Filler:
    """A real process inside `staged_directory(target)`."""

    def __init__(self, target: Path, name: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _FILLER, str(target), name],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.staging = Path(self.proc.stdout.readline().strip())
        assert self.staging.is_dir(), "the filler did not reach its staging directory"

    def finish(self) -> str:
        out, _ = self.proc.communicate("go\n", timeout=30)
        assert self.proc.returncode == 0
        return out

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=30)


@pytest.fixture
def fillers() -> Iterator[list[Filler]]:
    started: list[Filler] = []
    yield started
    for filler in started:
        if filler.proc.poll() is None:
            filler.kill()


def test_each_filler_stages_apart_and_a_live_ones_staging_is_never_removed(
    tmp_path: Path, fillers: list[Filler]
) -> None:
    """Mutation control: make the sweep remove a sibling whatever its lock (drop the
    `_try_flock` check in `remove_if_dead`) and the live filler's staging is gone."""
    target = tmp_path / "entry"
    live = Filler(target, "live")
    fillers.append(live)
    assert live.staging.name.startswith(staging_prefix(target))
    with pytest.raises(TargetExists), staged_directory(target) as content:
        (content / "made-by").write_text("second")
        assert live.staging.is_dir()  # our sweep left the live filler's staging alone
        assert (live.staging / "content" / "made-by").read_text() == "live"
        assert content.parent != live.staging
        live.finish()  # it renames into place first: ours must not clobber it
    assert (target / "made-by").read_text() == "live"
    assert not live.staging.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # both stagings removed


def test_a_killed_fillers_staging_is_removed_by_the_next(
    tmp_path: Path, fillers: list[Filler]
) -> None:
    target = tmp_path / "entry"
    dead = Filler(target, "dead")
    fillers.append(dead)
    dead.kill()
    assert (dead.staging / "content" / "made-by").is_file()  # SIGKILL left it behind
    with staged_directory(target) as content:
        assert not dead.staging.exists()  # swept before we staged
        (content / "made-by").write_text("next")
    assert (target / "made-by").read_text() == "next"
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


_LOCKED_FILL = """
import sys, time
from pathlib import Path
from receipts.staging import fill_lock, staged_directory
target, log, delay = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
with fill_lock(target, "the test entry"):
    if target.is_dir():
        print("adopted", flush=True)
    else:
        with staged_directory(target) as content:
            with log.open("a") as handle:
                handle.write("built\\n")
            time.sleep(delay)
            (content / "value").write_text("one")
        print("built", flush=True)
"""


def _fill_together(target: Path, log: Path, count: int) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _LOCKED_FILL, str(target), str(log), "1.5"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def test_fillers_started_together_build_once_and_the_others_adopt(tmp_path: Path) -> None:
    """Mutation control: replace `fill_lock` by a no-op and two or three build (one of
    them then fails with TargetExists): this test fails."""
    target, log = tmp_path / "entry", tmp_path / "builds.log"
    results = _fill_together(target, log, 3)
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    assert sorted(r.stdout.strip() for r in results) == ["adopted", "adopted", "built"]
    assert log.read_text() == "built\n"  # exactly one build
    waited = [r for r in results if "waiting for another process filling" in r.stderr]
    assert len(waited) >= 1  # a waiter says why it does nothing
    assert "the test entry" in waited[0].stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".entry.lock", "builds.log", "entry"]


def test_a_fill_lock_of_a_killed_holder_is_free(tmp_path: Path) -> None:
    target = tmp_path / "entry"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom receipts.staging import fill_lock\n"
            "with fill_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n"
            "    time.sleep(60)\n",
            str(target),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    waits: list[str] = []
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    started = time.monotonic()
    with fill_lock(target, on_wait=waits.append):
        assert time.monotonic() - started < 5
    assert waits == []  # the kernel dropped the dead holder's lock
    assert lock_path_for(target).is_file()
