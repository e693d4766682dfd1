"""`harness schema --out DIR`: the JSON Schema of every record kind."""

from __future__ import annotations

import argparse
from pathlib import Path

from receipts.schema_docs import write_schemas


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("schema", help="write the JSON Schemas of every record")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for path in write_schemas(args.out):
        print(path)
    return 0
