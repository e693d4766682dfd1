"""The harness's version, from one home: the `version` of pyproject.toml.

Why one home: `harness --version` and every receipt's `trial.json` (`harness_version`)
must say the same thing, and a second constant drifts. The installed distribution's
metadata carries pyproject's value; a checkout run without installing (PYTHONPATH)
reads pyproject.toml itself, the same value.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _version() -> str:
    try:
        return importlib.metadata.version("harness")
    except importlib.metadata.PackageNotFoundError:
        with PYPROJECT.open("rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])


HARNESS_VERSION = _version()
