"""A whole tiny scripted trial: wall time split by stage, and the orchestrator's own cost.

Run: .venv/bin/python -m benchmarks.bench_trial [--repeat 3] [--task py-one-line-fix]

Each repeat is one `harness trial --profile tiny --agent scripted:<the task's solution>`
in a fresh Python process (so its peak RSS is the trial's alone), under TCG. The
per-stage split comes from the pipeline's own progress events (the same ones the
live display draws), so it is the pipeline's view, not a re-timing from outside.
Reported per repeat and as medians:
- wall seconds per step (preflight … verification, teardown, bundle) and in total;
- the orchestrator's CPU seconds (user + system of its own process and threads: what
  the harness costs, not QEMU's emulation, which runs in a child and is reported
  separately as `children_cpu_s`);
- the orchestrator's peak RSS (ru_maxrss of its process).
The verdict of every repeat must be `accepted` and its receipt must audit as valid;
a run that is not is reported and fails the benchmark (exit 1), never averaged in.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def one_trial(task: str) -> dict[str, Any]:
    """Run one trial in this process and measure it (called in a child process)."""
    from harness.profiles import load_profile
    from harness.trial.context import TrialOptions
    from harness.trial.pipeline import Trial
    from harness.trial.progress import StageTimer

    script = REPO / "profiles" / "tasks" / task / "scripts" / "solution.json"
    timer = StageTimer()
    with tempfile.TemporaryDirectory(prefix="bench-trial-") as out:
        options = TrialOptions(
            profile=load_profile("tiny"), task=task, script=script, out_dir=Path(out), accel="tcg"
        )
        before = resource.getrusage(resource.RUSAGE_SELF)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        result = asyncio.run(Trial(options, progress=timer).run())
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "verdict": result.verdict,
        "valid": result.valid,
        "wall_s": wall,
        "steps_s": timer.seconds(),
        "orchestrator_cpu_s": (after.ru_utime - before.ru_utime)
        + (after.ru_stime - before.ru_stime),
        "children_cpu_s": (children_after.ru_utime - children_before.ru_utime)
        + (children_after.ru_stime - children_before.ru_stime),
        "orchestrator_peak_rss_mib": after.ru_maxrss / 1024,
    }


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(run[key]) for run in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_trial")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--task", default="py-one-line-fix")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_trial(args.task)))
        return 0
    runs: list[dict[str, Any]] = []
    for index in range(args.repeat):
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_trial", "--one", "--task", args.task],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            print(f"repeat {index}: the trial process failed:\n{child.stderr[-2000:]}")
            return 1
        run = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"repeat {index}: {json.dumps(run, sort_keys=True)}")
        if run["verdict"] != "accepted" or not run["valid"]:
            print(f"repeat {index}: verdict {run['verdict']}, valid {run['valid']}: not counted")
            return 1
        runs.append(run)
    steps = list(runs[0]["steps_s"])
    print(f"\ntiny scripted trial ({args.task}), TCG, medians of {len(runs)}:")
    for step in steps:
        seconds = statistics.median(run["steps_s"].get(step, 0.0) for run in runs)
        print(f"  {step:<14} {seconds:7.2f} s")
    print(f"  {'total wall':<14} {_median(runs, 'wall_s'):7.2f} s")
    print(f"orchestrator CPU       {_median(runs, 'orchestrator_cpu_s'):7.2f} s")
    print(f"children CPU (QEMU..)  {_median(runs, 'children_cpu_s'):7.2f} s")
    print(f"orchestrator peak RSS  {_median(runs, 'orchestrator_peak_rss_mib'):7.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
