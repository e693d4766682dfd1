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

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

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

    A buffer is in use until every future held for it is done: the output's hash of
    the chunk written from it (:meth:`hold`) and, for a shard hashed as it is read
    (host/model/sourcehash.py), the source's hash of the bytes read into it.
    """

    def __init__(self, nbytes: int) -> None:
        half = max(1, (nbytes + 1) // 2)
        self.buffers = [bytearray(half), bytearray(half)]
        self.guards: list[list[Future[None]]] = [[], []]
        self.slot = 0

    def hold(self, hashed: Future[None] | None) -> None:
        """The current buffer is in use until *hashed* is done."""
        if hashed is not None:
            self.guards[self.slot].append(hashed)

    def next_buffer(self, nbytes: int) -> bytearray:
        """The other buffer, once its last chunk is hashed, at least *nbytes* long."""
        self.slot ^= 1
        for guard in self.guards[self.slot]:
            guard.result()
        self.guards[self.slot] = []
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


ReadInto = Callable[[memoryview, int], "Future[None] | None"]
"""Fill a view from a file offset; the future is done once the bytes are hashed."""


class StoredChunk(NamedTuple):
    """Bytes to write, the stored source bytes they come from, and where those start.

    ``data`` is ``source`` itself unless the tensor's rows were permuted.
    """

    data: memoryview
    source: memoryview
    offset: int


@contextmanager
def path_reader(path: Path) -> Iterator[ReadInto]:
    """A :data:`ReadInto` over *path*, open for the duration (nothing hashed)."""
    with path.open("rb", buffering=0) as handle:

        def read_into(view: memoryview, offset: int) -> None:
            handle.seek(offset)
            got = 0
            while got < len(view):
                n = handle.readinto(view[got:])
                if not n:
                    raise OSError("source shorter than its header declares")
                got += n

        yield read_into


def stored_chunks(
    read_into: ReadInto, entry: TensorEntry, scratch: Scratch, permute_heads: int | None
) -> Iterator[StoredChunk]:
    """The tensor's stored bytes in whole-row chunks that fit *scratch*, in file order.

    A permuted tensor is read whole (the permutation moves rows within a head) and
    its rows reordered as stored values. A chunk is valid until the next one is
    requested: the consumer must write and hash it before asking for more.
    """
    if permute_heads is not None:
        # Read into one scratch buffer and permute into the other: no fresh pages per
        # tensor, and the permuted copy is the only copy (reshaping the swapped view
        # would make a second one).
        source = memoryview(scratch.next_buffer(entry.nbytes))[: entry.nbytes]
        scratch.hold(read_into(source, entry.begin))
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
        yield StoredChunk(target, source, entry.begin)
        return
    rows = entry.shape[0] if entry.shape else 1
    row_bytes = max(1, entry.nbytes // rows) if rows else 1
    step = max(1, len(scratch.buffers[0]) // row_bytes) * row_bytes
    position = entry.begin
    while position < entry.end:
        size = min(step, entry.end - position)
        view = memoryview(scratch.next_buffer(size))[:size]
        scratch.hold(read_into(view, position))
        yield StoredChunk(view, view, position)
        position += size
