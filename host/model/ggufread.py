"""``gguf.GGUFReader`` without ``numpy.memmap``'s per-slice cost.

Why: the reader parses a GGUF's header by slicing its memory map once per value, and a
``numpy.memmap`` slice runs ``memmap.__array_finalize__`` each time. A 151,936-token
vocabulary is about 1.5 million slices: 11-12 s per read of the header on this machine,
paid twice by every ``harness model prepare`` of qwen4b (verification, then the record's
tensor counts) and once by every trial that adopts the cached GGUF. Over a plain
``ndarray`` view of the same map the same parsing code takes a third of that.

Nothing else changes: the same class parses the same bytes, every field and tensor is
equal (tests/host/model/test_ggufread.py), and the tensors' data are views of the same
map, kept alive by the view's base. ``tensor_types`` is for when only the tensors'
types are wanted (the model record's counts).
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt


class GGUFReader(gguf.GGUFReader):
    """``gguf.GGUFReader`` whose ``data`` is a plain ``ndarray`` view of its map."""

    @property  # type: ignore[override]
    def data(self) -> npt.NDArray[Any]:
        return self._plain

    @data.setter
    def data(self, value: npt.NDArray[Any]) -> None:
        self._plain: npt.NDArray[Any] = value.view(np.ndarray)


# GGUF value types -> fixed byte size (gguf.GGUFValueType: 8 is STRING, 9 is ARRAY)
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def tensor_types(path: Path) -> list[int]:
    """Each tensor's ggml type id, in file order, from a GGUF v2/v3 header.

    Why not the reader: the model record only counts tensors by type, and the reader
    builds an object per vocabulary entry first (about 4 s for 152k tokens); this walks
    past the metadata values without reading them (about 0.1 s). Little-endian only,
    as every GGUF this project writes; anything malformed raises ValueError.
    """
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        try:
            magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", m, 0)
            if magic != b"GGUF" or version not in (2, 3):
                raise ValueError("not a GGUF v2/v3 file")
            offset = 24
            for _ in range(n_kv):
                (length,) = struct.unpack_from("<Q", m, offset)
                offset = _skip_value(m, offset + 8 + length)
            types: list[int] = []
            for _ in range(n_tensors):
                (length,) = struct.unpack_from("<Q", m, offset)
                offset += 8 + length
                (n_dims,) = struct.unpack_from("<I", m, offset)
                offset += 4 + 8 * n_dims
                (ggml_type,) = struct.unpack_from("<I", m, offset)
                types.append(ggml_type)
                offset += 12  # type, data offset
        except struct.error as exc:
            raise ValueError("truncated GGUF header") from exc
    return types


def _skip_value(m: mmap.mmap, offset: int, vtype: int | None = None) -> int:
    """The offset after one metadata value (its type first unless *vtype* is given)."""
    if vtype is None:
        (vtype,) = struct.unpack_from("<I", m, offset)
        offset += 4
    if vtype in _FIXED:
        return offset + _FIXED[vtype]
    if vtype == _STRING:
        (length,) = struct.unpack_from("<Q", m, offset)
        return offset + 8 + int(length)
    if vtype != _ARRAY:
        raise ValueError("unknown GGUF value type")
    item, count = struct.unpack_from("<IQ", m, offset)
    offset += 12
    if item in _FIXED:
        return offset + int(count) * _FIXED[item]
    for _ in range(count):
        offset = _skip_value(m, offset, item)
    return offset
