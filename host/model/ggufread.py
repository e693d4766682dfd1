"""``gguf.GGUFReader`` without ``numpy.memmap``'s per-slice cost.

Why: the reader parses a GGUF's header by slicing its memory map once per value, and a
``numpy.memmap`` slice runs ``memmap.__array_finalize__`` each time. A 151,936-token
vocabulary is about 1.5 million slices: 11-12 s per read of the header on this machine,
paid twice by every ``harness model prepare`` of qwen4b (verification, then the record's
tensor counts) and once by every trial that adopts the cached GGUF. Over a plain
``ndarray`` view of the same map the same parsing code takes a third of that.

Nothing else changes: the same class parses the same bytes, every field and tensor is
equal (tests/host/model/test_ggufread.py), and the tensors' data are views of the same
map, kept alive by the view's base.
"""

from __future__ import annotations

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
