"""host/model/ggufread.GGUFReader reads what gguf.GGUFReader reads, faster."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from host.model.convert import convert
from host.model.ggufread import GGUFReader


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
