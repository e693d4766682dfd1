"""Guest entry point: verify the final workspace with the hidden tests.

    python3 -m guest.verify --task-dir D --workspace W --scratch S --records OUT.json

Run through the runtime gate after the agent and the worker have stopped. Writes the
closed VerificationRecord as canonical JSON to OUT.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from guest.task import load_task, task_digest
from guest.verify.run import verify


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="guest.verify")
    parser.add_argument("--task-dir", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--records", type=Path, required=True)
    args = parser.parse_args(argv)
    task = load_task(args.task_dir)
    record = verify(task, args.task_dir, task_digest(args.task_dir), args.workspace, args.scratch)
    args.records.write_bytes(record.canonical_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
