"""Shared fixtures: each tiny checkpoint is synthesized once per session.

Tests that damage a checkpoint work on a copy (``copy_of``), never on the shared one.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from host.model.synth import synthesize_tiny, synthesize_tiny_llama


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 checkpoint (read-only by convention)."""
    out = tmp_path_factory.mktemp("tiny") / "qwen3"
    synthesize_tiny(out)
    return out


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama checkpoint (read-only by convention)."""
    out = tmp_path_factory.mktemp("tiny") / "llama"
    synthesize_tiny_llama(out)
    return out


@pytest.fixture
def copy_of(tmp_path: Path) -> Callable[[Path], Path]:
    """Copy a checkpoint into this test's tmp dir so the test may damage it."""

    counter = iter(range(1_000))

    def copy(source: Path) -> Path:
        target = tmp_path / f"copy{next(counter)}-{source.name}"
        shutil.copytree(source, target)
        return target

    return copy
