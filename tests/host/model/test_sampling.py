"""``general.sampling.*`` from generation_config.json, as llama.cpp's converter writes them.

Expectation from llama.cpp (llama-cpp-python 0.3.36 sdist, ``gguf-py/gguf/metadata.py``
``Metadata.load`` lines 77-89, ``set_gguf_meta_model`` lines 609-632, and the writer's
``add_sampling_*``): ``top_k`` as INT32, ``top_p`` and ``temperature`` as FLOAT32 (keys
``general.sampling.top_k/top_p/temp``), ``penalty_repeat`` else ``repetition_penalty``
as ``general.sampling.penalty_repeat``; other generation_config fields are not written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

from host.model.categories import ConvertError
from host.model.convert import convert
from host.model.pins import pins_of, verify_source
from host.model.verify_gguf import verify_gguf
from tests.host.model.divergence_cases import build

Copy = Callable[[Path], Path]
V = gguf.GGUFValueType


def _sampling(path: Path) -> dict[str, tuple[list[V], object]]:
    reader = gguf.GGUFReader(path)
    return {
        name: (field.types, field.contents())
        for name, field in reader.fields.items()
        if name.startswith("general.sampling.")
    }


def test_generation_config_becomes_sampling_keys(tmp_path: Path) -> None:
    root = build("qwen3-generation-config", tmp_path / "src")
    verify_source(root, pins_of(root))  # a pinned input like every file in the snapshot
    result = convert(root, tmp_path / "out", "bf16")
    got = _sampling(result.path)
    assert got == {
        "general.sampling.top_k": ([V.INT32], 20),
        "general.sampling.top_p": ([V.FLOAT32], pytest.approx(np.float32(0.8))),
        "general.sampling.temp": ([V.FLOAT32], pytest.approx(np.float32(0.7))),
        "general.sampling.penalty_repeat": ([V.FLOAT32], pytest.approx(np.float32(1.05))),
    }
    temp = got["general.sampling.temp"][1]
    assert isinstance(temp, float) and np.float32(temp) == np.float32(0.7)  # bit-exact
    verify_gguf(result.path, root, "bf16", expected_sha256=result.sha256)


def test_without_generation_config_no_sampling_keys(tmp_path: Path, tiny_dir: Path) -> None:
    assert _sampling(convert(tiny_dir, tmp_path / "out", "f32").path) == {}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"penalty_repeat": 1.5, "repetition_penalty": 1.05}, {"penalty_repeat": 1.5}),
        ({"repetition_penalty": 1.5}, {"penalty_repeat": 1.5}),
        # dict.get("penalty_repeat", ...) returns the null: nothing is written
        ({"penalty_repeat": None, "repetition_penalty": 1.05, "top_k": None}, {}),
    ],
)
def test_penalty_repeat_precedes_repetition_penalty(
    tmp_path: Path,
    tiny_dir: Path,
    copy_of: Copy,
    config: dict[str, object],
    expected: dict[str, float],
) -> None:
    root = copy_of(tiny_dir)
    (root / "generation_config.json").write_text(json.dumps(config))
    got = _sampling(convert(root, tmp_path / "out", "f32").path)
    assert got == {f"general.sampling.{k}": ([V.FLOAT32], v) for k, v in expected.items()}


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ('{"top_k": 20.5}', "unsupported_config"),
        ('{"temperature": "hot"}', "unsupported_config"),
        ('{"top_k": true}', "unsupported_config"),
        ("[1]", "config_unreadable"),
        ("{", "config_unreadable"),
    ],
)
def test_bad_generation_config_refused_and_named(
    tiny_dir: Path, copy_of: Copy, text: str, category: str
) -> None:
    root = copy_of(tiny_dir)
    (root / "generation_config.json").write_text(text)
    with pytest.raises(ConvertError) as info:
        convert(root, root.parent / "out", "f32")
    assert (info.value.category, info.value.subject) == (category, "generation_config.json")
