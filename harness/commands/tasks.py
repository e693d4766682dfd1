"""`harness tasks import polyglot DIR --language python|javascript [--commit SHA]`.

Writes each exercise as `profiles/tasks/polyglot-<py|js>-<slug>/` and the set's index
(`profiles/polyglot/<language>.toml`: source commit, licence, every task's digest, and
every exercise left out with its reason). Exit 0 when the import ran (whatever it left
out), 2 when DIR or the target cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.tasks.polyglot import ImportRefused, import_polyglot, index_toml, source_commit
from harness.trial.diskfiles import REPO


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("tasks", help="import task corpora")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    imp = actions.add_parser("import", help="import a benchmark's exercises as tasks")
    imp.add_argument("corpus", choices=("polyglot",), help="which benchmark")
    imp.add_argument("directory", type=Path, metavar="DIR", help="a checkout of the benchmark")
    imp.add_argument(
        "--language", choices=("python", "javascript"), required=True, help="which track"
    )
    imp.add_argument("--commit", help="the benchmark's commit, when DIR is not a git checkout")
    imp.add_argument(
        "--tasks-dir", type=Path, default=REPO / "profiles" / "tasks", help=argparse.SUPPRESS
    )
    imp.add_argument(
        "--index", type=Path, default=None, help="default: profiles/polyglot/LANGUAGE.toml"
    )
    imp.add_argument("--only", nargs="*", default=(), help="exercise slugs (default: all)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        commit = source_commit(args.directory, args.commit)
        result = import_polyglot(
            args.directory, args.language, args.tasks_dir, commit, only=tuple(args.only)
        )
    except ImportRefused as exc:
        print(f"harness tasks: {exc}", file=sys.stderr)
        return 2
    index = args.index or REPO / "profiles" / "polyglot" / f"{args.language}.toml"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(index_toml(result), encoding="utf-8")
    for task in result.imported:
        print(f"imported   {task.task_id:<40} {task.tests:>3} tests  {task.digest[:16]}")
    for skip in result.skipped:
        print(f"left out   {skip.slug:<40} {skip.reason}")
    print(f"{len(result.imported)} imported, {len(result.skipped)} left out; index {index}")
    return 0
