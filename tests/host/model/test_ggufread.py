"""host/model/ggufread.GGUFReader reads what gguf.GGUFReader reads, faster."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from host.model.categories import OutType
from host.model.convert import convert
from host.model.ggufread import GGUFReader, tensor_types


def test_every_field_and_tensor_equal_to_gguf_reader(tmp_path: Path, tiny_dir: Path) -> None:
    path = convert(tiny_dir, tmp_path / "out", "q8_0").path
    ours, theirs = GGUFReader(path), gguf.GGUFReader(path)
    assert type(ours.data) is np.ndarray and isinstance(theirs.data, np.memmap)
    assert list(ours.fields) == list(theirs.fields)
    for name, field in theirs.fields.items():
        assert ours.fields[name].types == field.types, name
        assert ours.fields[name].contents() == field.contents(), name
    assert len(ours.tensors) == len(theirs.tensors) > 0
    for a, b in zip(ours.tensors, theirs.tensors, strict=True):
        assert (a.name, a.tensor_type, list(a.shape), a.n_bytes, a.data_offset) == (
            b.name,
            b.tensor_type,
            list(b.shape),
            b.n_bytes,
            b.data_offset,
        )
        assert np.array_equal(np.asarray(a.data), np.asarray(b.data))


def test_tensor_types_equal_the_readers(tmp_path: Path, tiny_dir: Path, llama_dir: Path) -> None:
    """The header walk finds every tensor's type as gguf.GGUFReader does, past metadata of
    every kind the converter writes (strings, string arrays, int and float arrays)."""
    cases: tuple[tuple[Path, OutType], ...] = (
        (tiny_dir, "q8_0"),
        (llama_dir, "f16"),
        (tiny_dir, "bf16"),
    )
    for source, outtype in cases:
        path = convert(source, tmp_path / f"{source.name}-{outtype}", outtype).path
        expected = [int(t.tensor_type) for t in gguf.GGUFReader(path).tensors]
        assert tensor_types(path) == expected
        assert len(set(expected)) >= 2  # F32 norms beside the outtype's weights


def test_tensor_types_refuses_a_truncated_header(tmp_path: Path, tiny_dir: Path) -> None:
    path = convert(tiny_dir, tmp_path / "out", "f32").path
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:4096])  # inside the vocabulary's metadata
    with pytest.raises(ValueError, match="truncated"):
        tensor_types(cut)
    cut.write_bytes(b"GGUF" + (9).to_bytes(4, "little") + bytes(16))
    with pytest.raises(ValueError, match="v2/v3"):
        tensor_types(cut)
