"""`harness gc [--dry-run]`: release what a killed trial left, one cleanup receipt each."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from host.gc import collect, find_leftovers, find_unowned
from receipts.canonical import canonical

TRIALS = Path.home() / ".cache" / "harness" / "trials"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("gc", help="release resources a killed trial left behind")
    parser.add_argument("--dry-run", action="store_true", help="list, release nothing")
    parser.add_argument("--trials-root", type=Path, default=TRIALS, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        for item in find_leftovers(args.trials_root):
            print(f"{item.kind:<14} {item.name}")
        for item in find_unowned(args.trials_root):
            print(f"{item.kind:<14} {item.name}  (left alone: no trace in this trials root)")
        return 0
    failed = False
    for index, (item, result) in enumerate(collect(args.trials_root)):
        receipt = result.to_record(index, released_by="gc")
        sys.stdout.write(canonical(receipt.to_json()).decode() + "\n")
        failed = failed or result.status == "failed"
        del item
    return 1 if failed else 0
