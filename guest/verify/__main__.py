"""Guest entry point: verify the final workspace with the hidden tests.

    python3 -m guest.verify --task-dir D --workspace W --scratch S --records OUT.json
        [--wait-for READY --wait-s SECONDS]

Run through the runtime gate in the verification guest. Writes the closed
VerificationRecord as canonical JSON to OUT.

With `--wait-for`, the verifier is started before the agent has finished (the host
prepares the verification guest while the agent works): it imports, loads the task and
hashes it, then waits for READY to exist, which the host creates only once the carried
workspace is complete at W. Nothing of W is read before that. The wait is bounded by
`--wait-s`; past it the verifier exits without a record (WAIT_EXPIRED).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from guest.task import load_task, task_digest
from guest.verify.run import verify

WAIT_EXPIRED = 3
"""Exit status when the workspace never became ready within `--wait-s`."""
WAIT_POLL_S = 0.02


def wait_for(ready: Path, wait_s: float) -> bool:
    """Whether `ready` exists before `wait_s` passes (polled: the guest has no inotify
    tool in the runtime, and 20 ms is small beside the tests' seconds)."""
    end = time.monotonic() + wait_s
    while not ready.exists():
        if time.monotonic() >= end:
            return False
        time.sleep(WAIT_POLL_S)
    return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="guest.verify")
    parser.add_argument("--task-dir", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--wait-for", type=Path, default=None)
    parser.add_argument("--wait-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    task = load_task(args.task_dir)
    digest = task_digest(args.task_dir)
    if args.wait_for is not None and not wait_for(args.wait_for, args.wait_s):
        return WAIT_EXPIRED
    record = verify(task, args.task_dir, digest, args.workspace, args.scratch)
    args.records.write_bytes(record.canonical_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
