"""Every imported polyglot Python task's oracle and null through the verifier, split and in
process, on this host (as root: the verifier's users are real).

    nice -n 15 .venv/bin/python -m benchmarks.split_judge_polyglot [--hack] [--only TASK ...]

Run it as root: the verifier switches to its real users (`nobody` and the judge's).

For each task: the oracle workspace (the task's workspace with `scripts/oracle.json`'s
write applied) and the null workspace (the stub as shipped) are verified twice, with
the task's own `hidden.judge` and with `in_process`. `--hack` adds a third workspace:
the stub with a line that replaces `unittest.TestCase.run` by a function that does
nothing, planted at the top of the solution module. One line per task, then totals.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from guest.task import Task, copy_task_private, load_task, task_digest
from guest.verify.run import verify
from harness.tasks.polyglot import RUNNER_PATCH

TASKS = Path(__file__).resolve().parent.parent / "profiles" / "tasks"


def _workspace(task_dir: Path, target: Path, kind: str) -> Path:
    shutil.copytree(task_dir / "workspace", target)
    if kind == "null":
        return target
    steps = json.loads((task_dir / "scripts" / "oracle.json").read_text(encoding="utf-8"))
    write = next(step for step in steps if step["tool"] == "write")
    solution = target / write["arguments"]["filePath"]
    if kind == "oracle":
        solution.write_text(write["arguments"]["content"], encoding="utf-8")
    else:  # hack: the stub, with the runner patched on import
        solution.write_text(RUNNER_PATCH + solution.read_text(encoding="utf-8"), encoding="utf-8")
    return target


def _ship(task_dir: Path, scratch: Path) -> Path:
    """The task as the verification guest holds it: a copy only root can enter."""
    copy_task_private(task_dir, scratch / "shipped")
    return scratch / "shipped"


def _run(task: Task, task_dir: Path, kind: str, scratch: Path) -> tuple[str, int, int, float]:
    workspace = _workspace(task_dir, scratch / f"{kind}-final", kind)
    task_dir = scratch / "shipped" if (scratch / "shipped").exists() else _ship(task_dir, scratch)
    started = time.monotonic()
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / f"{kind}-v")
    return record.result, record.tests_passed, record.tests_expected, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hack", action="store_true")
    parser.add_argument("--only", nargs="*", default=())
    args = parser.parse_args()
    kinds = ["oracle", "null", *(["hack"] if args.hack else [])]
    totals: dict[str, dict[str, int]] = {}
    times: dict[str, float] = {"split": 0.0, "in_process": 0.0}
    for task_dir in sorted(TASKS.glob("polyglot-py-*")):
        if args.only and task_dir.name not in args.only:
            continue
        task = load_task(task_dir)
        modes = {task.hidden.judge: task}
        if task.hidden.judge != "in_process":
            hidden = task.hidden.model_copy(update={"judge": "in_process"})
            modes["in_process"] = task.model_copy(update={"hidden": hidden})
        cells = []
        for mode, variant in modes.items():
            for kind in kinds:
                with tempfile.TemporaryDirectory(prefix="split-bench-") as tmp:
                    scratch = Path(tmp)
                    scratch.chmod(0o755)
                    result, passed, expected, seconds = _run(variant, task_dir, kind, scratch)
                times[mode] += seconds
                key = f"{task.hidden.judge if mode != 'in_process' else 'in_process'}:{kind}"
                totals.setdefault(key, {}).setdefault(result, 0)
                totals[key][result] += 1
                cells.append(f"{mode}/{kind}={result}({passed}/{expected},{seconds:.1f}s)")
        print(task_dir.name, " ".join(cells), flush=True)
    print(json.dumps({"totals": totals, "seconds": times}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
