"""The `harness` command line: parse, configure logging, dispatch to one command module."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from harness.commands import (
    audit,
    dispatch,
    doctor,
    gc,
    image,
    keygen,
    model,
    profiles,
    schema,
    suite,
    tasks,
    trial,
    view,
    worker,
)
from harness.version import HARNESS_VERSION
from receipts.log import configure_logging

COMMANDS = (
    trial,
    audit,
    view,
    model,
    image,
    dispatch,
    worker,
    profiles,
    doctor,
    gc,
    schema,
    suite,
    tasks,
    keygen,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness", description="Sandboxed evaluation of agentic coding trials."
    )
    parser.add_argument(
        "--log-format", choices=("console", "json"), default="console", help="log rendering"
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="least severe log event shown",
    )
    parser.add_argument("--version", action="version", version=f"harness {HARNESS_VERSION}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, getattr(logging, args.log_level.upper()))
    code: int = args.run(args)
    return code


def entry_point() -> None:
    """The console script: exit with the command's status."""
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
