"""`qwen4b_real` (the full-size qwen4b trial: ~15 GiB of RAM, 17 GB of disk, 15-30 min)
runs only when asked for by name, `-m qwen4b_real`: `make test`, CI and any other marker
expression (`-m integration` included) deselect it, so nobody starts it by accident."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "qwen4b_real" in (config.getoption("markexpr") or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("qwen4b_real") is None]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
