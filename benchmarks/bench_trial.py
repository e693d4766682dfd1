"""A whole tiny scripted trial: wall time split by stage, and the orchestrator's own cost.

Run: .venv/bin/python -m benchmarks.bench_trial [--repeat 3] [--task py-one-line-fix]
         [--guest-start cold,snapshot]

Each repeat is one `harness trial --profile tiny --agent scripted:<the task's solution>`
in a fresh Python process (so its peak RSS is the trial's alone), under TCG, once per
`--guest-start` mode, the modes alternated within each repeat (side by side, so a load
drift hits both). A snapshot the `snapshot` mode needs is made before the first repeat
(its cost is a trial's only once per image and guest shape; it is not counted). The
per-stage split comes from the pipeline's own progress events (the same ones the
live display draws), so it is the pipeline's view, not a re-timing from outside.
Reported per repeat and as medians:
- wall seconds per step (preflight … verification, teardown, bundle) and in total;
- the orchestrator's CPU seconds (user + system of its own process and threads: what
  the harness costs, not QEMU's emulation, which runs in a child and is reported
  separately as `children_cpu_s`);
- the orchestrator's peak RSS (ru_maxrss of its process);
- from the receipt: each guest's start (or restore) to first SSH command, and the time
  the hidden tests' run took in the verifier (`verification.json` `duration_ms`), with
  the verification stage's wall time as a multiple of it.
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


def one_trial(task: str, guest_start: str) -> dict[str, Any]:
    """Run one trial in this process and measure it (called in a child process)."""
    from harness.profiles import load_profile
    from harness.trial.context import TrialOptions
    from harness.trial.pipeline import Trial
    from harness.trial.progress import StageTimer
    from receipts.audit import audit_and_read

    script = REPO / "profiles" / "tasks" / task / "scripts" / "solution.json"
    timer = StageTimer()
    with tempfile.TemporaryDirectory(prefix="bench-trial-") as out:
        options = TrialOptions(
            profile=load_profile("tiny"),
            task=task,
            script=script,
            out_dir=Path(out),
            accel="tcg",
            guest_start="cold" if guest_start == "cold" else "snapshot",
        )
        before = resource.getrusage(resource.RUSAGE_SELF)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        result = asyncio.run(Trial(options, progress=timer).run())
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        _audit, records = audit_and_read(result.receipt.read_bytes())
    assert records is not None and records.vm is not None and records.verifier_vm is not None
    assert records.verification is not None
    return {
        "vm_to_ssh_s": (records.vm.boot_to_ssh_ms or 0) / 1000,
        "verifier_to_ssh_s": (records.verifier_vm.boot_to_ssh_ms or 0) / 1000,
        "hidden_tests_s": records.verification.duration_ms / 1000,
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
    parser.add_argument("--guest-start", default="snapshot", help="cold, snapshot, or both")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    modes = args.guest_start.split(",")
    if not modes or not set(modes) <= {"cold", "snapshot"}:
        parser.error("--guest-start: cold and/or snapshot, comma-separated")
    if args.one:
        print(json.dumps(one_trial(args.task, modes[0])))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    # made once, not counted: a warm cache, as every later trial finds it
    if "snapshot" in modes and _one(args.task, "snapshot", "warm-up") is None:
        return 1
    for index in range(args.repeat):
        for mode in modes:
            run = _one(args.task, mode, f"repeat {index} {mode}")
            if run is None:
                return 1
            runs[mode].append(run)
    for mode in modes:
        _report(args.task, mode, runs[mode])
    return 0


def _one(task: str, mode: str, label: str) -> dict[str, Any] | None:
    child = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.bench_trial", "--one"),
            *("--task", task, "--guest-start", mode),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        print(f"{label}: the trial process failed:\n{child.stderr[-2000:]}")
        return None
    run: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"{label}: {json.dumps(run, sort_keys=True)}")
    if run["verdict"] != "accepted" or not run["valid"]:
        print(f"{label}: verdict {run['verdict']}, valid {run['valid']}: not counted")
        return None
    return run


def _report(task: str, mode: str, runs: list[dict[str, Any]]) -> None:
    steps = list(runs[0]["steps_s"])
    print(f"\ntiny scripted trial ({task}), TCG, guest start {mode}, medians of {len(runs)}:")
    for step in steps:
        seconds = statistics.median(run["steps_s"].get(step, 0.0) for run in runs)
        print(f"  {step:<14} {seconds:7.2f} s")
    print(f"  {'total wall':<14} {_median(runs, 'wall_s'):7.2f} s")
    verification = statistics.median(run["steps_s"].get("verification", 0.0) for run in runs)
    tests = _median(runs, "hidden_tests_s")
    print(f"agent guest to SSH     {_median(runs, 'vm_to_ssh_s'):7.2f} s")
    print(f"verifier guest to SSH  {_median(runs, 'verifier_to_ssh_s'):7.2f} s")
    print(f"hidden tests' run      {tests:7.2f} s (verification stage {verification / tests:.2f}x)")
    print(f"orchestrator CPU       {_median(runs, 'orchestrator_cpu_s'):7.2f} s")
    print(f"children CPU (QEMU..)  {_median(runs, 'children_cpu_s'):7.2f} s")
    print(f"orchestrator peak RSS  {_median(runs, 'orchestrator_peak_rss_mib'):7.1f} MiB")


if __name__ == "__main__":
    raise SystemExit(main())
