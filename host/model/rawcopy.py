"""Stored-bytes passthrough for tensors whose source type is the output type.

Why: converting bf16 -> bf16 through float32 and ``gguf.quants`` cost about 2.6 s
per 256 MB here, for bytes that come out equal to the input. For F32 -> F32 that
is exact by definition; for F16 -> F16 and BF16 -> BF16 the round trip through
float32 is the identity on every value except NaN, whose quiet bit ``gguf.quants``
(like ggml) sets. So we copy the stored bytes (the Llama q/k permutation moves whole
values, so it applies to stored bits as well as to floats), in large reads into one
reused buffer, and a chunk that holds a NaN is handed back to the float path, which
keeps the output byte-identical to what ``convert_hf_to_gguf.py`` and our verifier
compute (tests check both).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from host.model.safetensors_header import DTYPES, TensorEntry

# source dtype -> (largest non-NaN positive pattern, largest non-NaN pattern), both as
# unsigned 16-bit; see :meth:`Scratch.has_nan`.
NAN_LIMITS: dict[str, tuple[int, int] | None] = {
    "F32": None,  # stored bytes are what ``astype('<f4')`` writes, NaN payloads included
    "F16": (0x7C00, 0xFC00),
    "BF16": (0x7F80, 0xFF80),
}


class Scratch:
    """Two read buffers reused across tensors, so a large copy does not fault in new
    pages, and one can be filled while the other is still being hashed.

    The consumer passes :meth:`hold` the future that is done when the chunk it was
    just given has been hashed; the buffer is refilled only after that.
    """

    def __init__(self, nbytes: int) -> None:
        half = max(1, (nbytes + 1) // 2)
        self.buffers = [bytearray(half), bytearray(half)]
        self.guards: list[Future[None] | None] = [None, None]
        self.slot = 0

    def hold(self, hashed: Future[None]) -> None:
        """The current buffer is in use until *hashed* is done."""
        self.guards[self.slot] = hashed

    def next_buffer(self, nbytes: int) -> bytearray:
        """The other buffer, once its last chunk is hashed, at least *nbytes* long."""
        self.slot ^= 1
        guard = self.guards[self.slot]
        if guard is not None:
            guard.result()
            self.guards[self.slot] = None
        if len(self.buffers[self.slot]) < nbytes:  # one row larger than a buffer
            self.buffers[self.slot] = bytearray(nbytes)
        return self.buffers[self.slot]

    @staticmethod
    def has_nan(chunk: npt.NDArray[np.uint16], positive_limit: int, limit: int) -> bool:
        """True when a 16-bit float in *chunk* is a NaN (exponent all ones, mantissa != 0).

        Why two maxima and no mask: NaN patterns are the top of two ranges. Read as
        signed 16-bit, positive NaNs (``positive_limit`` + 1 .. 0x7FFF) are the largest
        values; read as unsigned, negative NaNs (``limit`` + 1 .. 0xFFFF) are. Two
        read-only reductions replace masking into a temporary and then reducing it,
        which wrote a second copy of every chunk.
        """
        if chunk.size == 0:
            return False
        return int(chunk.view(np.int16).max()) > positive_limit or int(chunk.max()) > limit


def permute_qk(weights: npt.NDArray[Any], n_head: int) -> npt.NDArray[Any]:
    """llama.cpp's Llama q/k permutation: HF's rotate-half layout to interleaved pairs."""
    rows = weights.shape[0]
    return (
        weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _read_into(handle: object, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = handle.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            raise OSError("source shorter than its header declares")
        got += n


def stored_chunks(
    path: Path, entry: TensorEntry, scratch: Scratch, permute_heads: int | None
) -> Iterator[memoryview]:
    """The tensor's stored bytes in whole-row chunks that fit *scratch*.

    A permuted tensor is read whole (the permutation moves rows within a head) and
    its rows reordered as stored values. A chunk is valid until the next one is
    requested: the consumer must write and hash it before asking for more.
    """
    if permute_heads is not None:
        # Read into one scratch buffer and permute into the other: no fresh pages per
        # tensor, and the permuted copy is the only copy (reshaping the swapped view
        # would make a second one).
        source = memoryview(scratch.next_buffer(entry.nbytes))[: entry.nbytes]
        with path.open("rb", buffering=0) as handle:
            handle.seek(entry.begin)
            _read_into(handle, source)
        target = memoryview(scratch.next_buffer(entry.nbytes))[: entry.nbytes]
        dtype = DTYPES[entry.dtype][1]
        rows, rest = entry.shape[0], entry.shape[1:]
        half = rows // permute_heads // 2
        np.copyto(
            np.frombuffer(target, dtype=dtype).reshape(permute_heads, half, 2, *rest),
            np.frombuffer(source, dtype=dtype)
            .reshape(permute_heads, 2, half, *rest)
            .swapaxes(1, 2),
        )
        yield target
        return
    rows = entry.shape[0] if entry.shape else 1
    row_bytes = max(1, entry.nbytes // rows) if rows else 1
    step = max(1, len(scratch.buffers[0]) // row_bytes) * row_bytes
    with path.open("rb", buffering=0) as handle:
        handle.seek(entry.begin)
        remaining = entry.nbytes
        while remaining > 0:
            size = min(step, remaining)
            view = memoryview(scratch.next_buffer(size))[:size]
            _read_into(handle, view)
            remaining -= len(view)
            yield view
