"""`harness --version` from one home; every subcommand's help names itself as typed and
describes every option."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from guest.worker.__main__ import parser as worker_parser
from harness.cli import build_parser
from harness.trial import pipeline
from harness.version import HARNESS_VERSION

REPO = Path(__file__).parents[2]


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_version_is_pyprojects_everywhere() -> None:
    with (REPO / "pyproject.toml").open("rb") as handle:
        declared = tomllib.load(handle)["project"]["version"]
    assert HARNESS_VERSION == declared == importlib.metadata.version("harness")
    done = _harness("--version")
    assert done.returncode == 0
    assert done.stdout == f"harness {declared}\n"
    assert vars(pipeline)["HARNESS_VERSION"] is HARNESS_VERSION  # what trial.json records


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _undocumented(parser: argparse.ArgumentParser) -> list[str]:
    return [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]


def test_every_subcommand_names_itself_and_describes_every_option() -> None:
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 15
    for parser in parsers:
        assert parser.prog.startswith("harness"), parser.prog
        assert _undocumented(parser) == [], parser.prog


def test_worker_serve_help_names_harness_worker_and_every_option() -> None:
    """`harness worker serve -h` is the guest worker's own parser, told its name.
    Mutation control: `prog` not passed through (it said `python -m guest.worker serve`)."""
    done = _harness("worker", "serve", "-h")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: harness worker serve ")
    assert "guest.worker" not in done.stdout
    for parser in _parsers(worker_parser("harness worker")):
        assert _undocumented(parser) == [], parser.prog
    refused = _harness("worker", "serve", "--model", "x.gguf")
    assert refused.returncode == 2
    assert "harness worker serve: error:" in refused.stderr
    assert worker_parser().prog == "python -m guest.worker"  # in the guest, as typed there
