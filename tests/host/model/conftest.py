"""Shared fixtures: each tiny checkpoint is synthesized once per session.

Tests that damage a checkpoint work on a copy (``copy_of``), never on the shared one.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import host.model.cache as cache_module
import host.model.pins as pins_module
from host.model.synth import synthesize_tiny, synthesize_tiny_llama
from tests.host.model.helpers import Counting


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


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Counting], list[str]]:
    """Every shard source opened by prepare, and every file sha256_file hashed."""
    Counting.opened = []
    hashed: list[str] = []
    real = pins_module.sha256_file

    def sha256_file(path: Path) -> tuple[str, int]:
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(cache_module, "HashedSource", Counting)
    monkeypatch.setattr(pins_module, "sha256_file", sha256_file)
    monkeypatch.setattr(cache_module, "sha256_file", sha256_file)  # the small files' pins
    return Counting.opened, hashed
