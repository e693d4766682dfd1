"""Fixtures: a workspace, a directory outside it holding a secret, a jail, a tool set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.tools.jail import Jail
from guest.tools.registry import ToolSet
from tests.guest.tools.support import PASS_COMMAND

SECRET = "TOP-SECRET\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    return path


@pytest.fixture
def jail(ws: Path) -> Iterator[Jail]:
    with Jail(ws) as j:
        yield j


@pytest.fixture
def toolset(ws: Path) -> Iterator[ToolSet]:
    with ToolSet(ws, PASS_COMMAND, [], "approve_all") as ts:
        yield ts
