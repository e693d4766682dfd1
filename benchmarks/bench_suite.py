"""The local executor's speed-up over running members one at a time, side by side.

Run (real guests: under the machine's VM lock):
    flock /tmp/harness-vm.lock .venv/bin/python -m benchmarks.bench_suite \
        [--suite polyglot-python-slurm] [--cpus 2,4] [--out DIR]

Runs the same suite once per `--cpus` value, one after the other in this one process
(same machine, same load window), as `harness suite run SUITE --cpus N --json`; each
value is the CPU capacity the host-level ledger may reserve, so with the tiny profile's
2 vCPUs `--cpus 2` runs one member at a time and `--cpus 4` two. Prints, per value, the
suite's wall time, the concurrency it reached (from its own receipt), the members' wall
times added up, the verdict counts, and the ratio of the first value's wall time to each
(the speed-up over the one-at-a-time run). A ratio, not a goal: machines and their load
differ. Each run's suite receipt must audit valid, or the benchmark fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from receipts.audit.suite import audit_suite_and_read

REPO = Path(__file__).resolve().parents[1]


def run_suite(suite: str, cpus: int, out: Path) -> dict[str, Any]:
    """One `harness suite run`; its figures, read back from its audited suite receipt."""
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "suite", "run", suite),
            *("--cpus", str(cpus), "--out", str(out), "--json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"suite run with --cpus {cpus} exited {done.returncode}")
    summary = json.loads(done.stdout)
    result, record, members = audit_suite_and_read(Path(summary["suite"]).read_bytes())
    if record is None:
        raise SystemExit(f"the suite receipt of --cpus {cpus} does not audit: {result.findings}")
    member_s = sum(
        (rs.trial.ended_unix_ms - rs.trial.started_unix_ms) / 1000
        for rs in members.values()
        if rs.trial is not None
    )
    return {
        "cpus": cpus,
        "wall_s": round(wall_s, 1),
        "suite_wall_s": round((record.ended_unix_ms - record.started_unix_ms) / 1000, 1),
        "max_concurrency": record.max_concurrency,
        "members": len(record.members),
        "member_wall_s_sum": round(member_s, 1),
        "verdicts": {v.verdict: v.count for v in record.verdicts},
        "missing": {m.reason: m.count for m in record.missing},
        "suite_receipt_id": result.suite_receipt_id,
        "suite": summary["suite"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="polyglot-python-slurm")
    parser.add_argument("--cpus", default="2,4", help="ledger CPU capacities, first = baseline")
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-suite-"))
    rows = [run_suite(args.suite, int(c), out / f"cpus-{c}") for c in args.cpus.split(",")]
    baseline = rows[0]["suite_wall_s"]
    for row in rows:
        row["speedup_over_first"] = round(baseline / row["suite_wall_s"], 2)
        print(json.dumps(row, sort_keys=True))


if __name__ == "__main__":
    main()
