"""`harness trial`: the whole pipeline. Not built yet; it says so rather than pretend."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("trial", help="run one trial end to end (not yet available)")
    parser.add_argument("--profile", required=True)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print(
        f"harness trial: not yet: the trial pipeline is not built (profile {args.profile!r} "
        "was not run); see the open issues",
        file=sys.stderr,
    )
    return 3
