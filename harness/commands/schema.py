"""`harness schema --out DIR`: the JSON Schema of every record kind."""

from __future__ import annotations

import argparse
from pathlib import Path

from receipts.schema_docs import write_reference, write_schemas


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("schema", help="write the JSON Schemas of every record")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="directory for the schema files"
    )
    parser.add_argument(
        "--reference", type=Path, metavar="FILE", help="also write the Markdown field reference"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for path in write_schemas(args.out):
        print(path)
    if args.reference is not None:
        print(write_reference(args.reference))
    return 0
