"""Each attack on the split judge (tests/guest/verify/attacks.py) through `verify()` of the
checkout on PYTHONPATH: one line per attack and task, `result passed/expected category`.

    sudo PYTHONPATH=CHECKOUT .venv/bin/python -m benchmarks.judge_attacks

Run it as root from the checkout to measure (the verifier switches to its real users).
A checkout whose guest.task has `copy_task_private` gets the task shipped private, as the
verification guest holds it; an older one reads the task where it lies, as it did.
docs/measurements/verification.md holds a before/after run.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import guest.task as task_module
from guest.task import load_task, task_digest
from guest.verify.run import verify
from tests.guest.verify import attacks
from tests.guest.verify.test_judge_attacks import BUGGY_MOVING_SUM, SGF_EXPECTED_THIEF

TASKS = Path("profiles/tasks").resolve()


def run(task_id: str, files: dict[str, str]) -> str:
    scratch = Path(tempfile.mkdtemp(dir="/var/tmp"))
    os.chmod(scratch, 0o755)
    try:
        task_dir = TASKS / task_id
        ship = getattr(task_module, "copy_task_private", None)
        if ship is not None:
            ship(task_dir, scratch / task_id)
            task_dir = scratch / task_id
        workspace = scratch / "final"
        shutil.copytree(task_dir / "workspace", workspace)
        for name, content in files.items():
            (workspace / name).write_text(content)
        record = verify(
            load_task(task_dir), task_dir, task_digest(task_dir), workspace, scratch / "v"
        )
        return f"{record.result} {record.tests_passed}/{record.tests_expected} {record.category}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    for path in sorted(TASKS.glob("polyglot-py-*")):
        if load_task(path).hidden.judge == "split" and attacks.stub_shape(path).classes:
            name, content = attacks.yes_solution(path)
            print("always_equal", path.name, run(path.name, {name: content}), flush=True)
    for task_id in ("polyglot-py-bowling", "polyglot-py-sgf-parsing"):
        name, _ = attacks.oracle_source(TASKS / task_id)
        stub = (TASKS / task_id / "workspace" / name).read_text()
        thief = stub + attacks.ORACLE_THIEF_BESIDE_RUNTIME
        print("oracle_thief", task_id, run(task_id, {name: thief}), flush=True)
    table = {"stats.py": attacks.HIDDEN_TABLE + BUGGY_MOVING_SUM}
    print("hidden_table", "py-one-line-fix", run("py-one-line-fix", table), flush=True)
    leak = {"sgf_parsing.py": SGF_EXPECTED_THIEF}
    print("constructor", "polyglot-py-sgf-parsing", run("polyglot-py-sgf-parsing", leak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
