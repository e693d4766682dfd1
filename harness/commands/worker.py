"""`harness worker serve --model GGUF --sha256 HEX [--socket PATH | --port N] ...`.

The one place harness imports guest (ARCHITECTURE.md): the same worker that runs in
the guest also serves on a host; its options are guest.worker's own, and its parser
is told it is `harness worker` so that usage and errors name what the user typed.
"""

from __future__ import annotations

import argparse

from guest.worker.__main__ import main as worker_main


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="serve the inference worker (see: harness worker serve -h)",
        description="The inference worker; its options: harness worker serve -h.",
    )
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="serve --model GGUF --sha256 HEX ..."
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return int(worker_main(list(args.args), prog="harness worker") or 0)
