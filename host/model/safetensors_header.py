"""Parse safetensors headers ourselves and read one tensor at a time as numpy.

Why not ``safetensors.numpy``: it fails on BF16 unless ``ml_dtypes`` is imported, and
it loads whole files. A checkpoint is external input (docs/engineering.md §13), so the
header is validated at the edge: an oversized or malformed header (its JSON read by
`receipts.strictjson`, the one definition of strict JSON), an unknown dtype, a shape
that disagrees with its byte span, and offsets that overlap, leave a gap or point
outside the file are each refused with a closed category before any tensor byte is
trusted.

Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object of
``name -> {dtype, shape, data_offsets: [begin, end]}`` plus an optional
``__metadata__`` of strings), then the data buffer; offsets are relative to it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from host.model.categories import HeaderError, HeaderRefusal
from receipts.strictjson import StrictJsonError, StrictJsonKind, loads_strict

# The reference implementation refuses headers above 100 MB; so do we.
MAX_HEADER_BYTES = 100_000_000

# dtype name -> (bytes per element, numpy dtype of the stored bits)
DTYPES: dict[str, tuple[int, str]] = {
    "F64": (8, "<f8"),
    "F32": (4, "<f4"),
    "F16": (2, "<f2"),
    "BF16": (2, "<u2"),
    "I64": (8, "<i8"),
    "I32": (4, "<i4"),
    "I16": (2, "<i2"),
    "I8": (1, "i1"),
    "U8": (1, "u1"),
    "BOOL": (1, "?"),
}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor's declared dtype, shape and absolute byte span in the file."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """Size of the tensor's data in bytes."""
        return self.end - self.begin


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated header: tensors by name, text metadata, where data starts."""

    tensors: dict[str, TensorEntry]
    metadata: dict[str, str]
    data_start: int
    file_size: int


_HEADER_REFUSAL: dict[StrictJsonKind, HeaderRefusal] = {
    "invalid_json": "header_bad_json",
    "duplicate_key": "header_duplicate_key",
    "non_finite_number": "header_bad_json",  # NaN, Infinity and 1e999 are not JSON
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(name: str, raw: Any) -> tuple[str, tuple[int, ...], int, int]:
    if not isinstance(raw, dict) or set(raw) != {"dtype", "shape", "data_offsets"}:
        raise HeaderError("header_bad_entry")
    dtype, shape, offsets = raw["dtype"], raw["shape"], raw["data_offsets"]
    if not isinstance(dtype, str) or not isinstance(shape, list):
        raise HeaderError("header_bad_entry")
    if not all(_is_int(dim) and dim >= 0 for dim in shape):
        raise HeaderError("header_bad_entry")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_int, offsets)):
        raise HeaderError("header_bad_entry")
    if dtype not in DTYPES:
        raise HeaderError("unknown_dtype")
    begin, end = offsets
    if begin < 0 or end < begin:
        raise HeaderError("offsets_out_of_range")
    if math.prod(shape) * DTYPES[dtype][0] != end - begin:
        raise HeaderError("shape_size_mismatch")
    return dtype, tuple(shape), begin, end


def _check_layout(spans: list[tuple[int, int]], data_size: int) -> None:
    """Offsets must tile the data buffer exactly: no overlap, no gap, nothing outside."""
    position = 0
    for begin, end in sorted(spans):
        if end > data_size:
            raise HeaderError("offsets_out_of_range")
        if begin < position:
            raise HeaderError("offsets_overlap")
        if begin > position:
            raise HeaderError("offsets_gap")
        position = end
    if position != data_size:
        raise HeaderError("offsets_gap")


def parse_header(path: Path) -> SafetensorsHeader:
    """Read and validate the header of *path*; no tensor data is read."""
    with path.open("rb") as handle:
        file_size = handle.seek(0, 2)

        def read(offset: int, nbytes: int) -> bytes:
            handle.seek(offset)
            return handle.read(nbytes)

        return parse_header_from(read, file_size)


def parse_header_from(read: Callable[[int, int], bytes], file_size: int) -> SafetensorsHeader:
    """Validate the header given ``read(offset, nbytes)`` over a file of *file_size* bytes.

    Why a reader and not a path: a shard that is hashed while it is converted
    (host/model/sourcehash.py) has its header read through the same open file, so the
    header that plans the conversion is part of the bytes compared with the pin.
    """
    prefix = read(0, 8) if file_size >= 8 else b""
    if len(prefix) != 8:
        raise HeaderError("header_truncated")
    (length,) = struct.unpack("<Q", prefix)
    if length > MAX_HEADER_BYTES or length > file_size - 8:
        raise HeaderError("header_oversized")
    raw = read(8, length)
    if len(raw) != length:
        raise HeaderError("header_truncated")
    try:
        parsed: Any = loads_strict(raw)
    except StrictJsonError as exc:
        raise HeaderError(_HEADER_REFUSAL[exc.kind]) from exc
    if not isinstance(parsed, dict):
        raise HeaderError("header_bad_json")
    metadata = parsed.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in metadata.items()
    ):
        raise HeaderError("header_bad_entry")
    data_start = 8 + length
    tensors: dict[str, TensorEntry] = {}
    for name, raw_entry in parsed.items():
        dtype, shape, begin, end = _entry(name, raw_entry)
        tensors[name] = TensorEntry(name, dtype, shape, data_start + begin, data_start + end)
    spans = [(entry.begin - data_start, entry.end - data_start) for entry in tensors.values()]
    _check_layout(spans, file_size - data_start)
    return SafetensorsHeader(tensors, metadata, data_start, file_size)


def bf16_bits_to_f32(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """Widen BF16 bit patterns to float32 exactly: BF16 is the top half of an f32."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def read_span(path: Path, begin: int, nbytes: int) -> bytes:
    """Exactly *nbytes* of *path* from *begin*; a short file is ``offsets_out_of_range``."""
    with path.open("rb") as handle:
        handle.seek(begin)
        data = handle.read(nbytes)
    if len(data) != nbytes:
        raise HeaderError("offsets_out_of_range")
    return data


def read_raw(path: Path, entry: TensorEntry) -> npt.NDArray[Any]:
    """Read one tensor's stored values (BF16 as its uint16 bit patterns)."""
    data = read_span(path, entry.begin, entry.nbytes)
    array = np.frombuffer(data, dtype=np.dtype(DTYPES[entry.dtype][1]))
    return array.reshape(entry.shape)


def widen(raw: npt.NDArray[Any], dtype: str) -> npt.NDArray[np.float32]:
    """Stored values (BF16 as uint16 bit patterns) as float32; exact for every dtype."""
    if dtype == "BF16":
        return bf16_bits_to_f32(raw)
    if dtype in ("F32", "F16", "F64"):
        return raw.astype(np.float32)
    raise HeaderError("unknown_dtype")


def read_raw_rows(path: Path, entry: TensorEntry, start: int, stop: int) -> npt.NDArray[Any]:
    """Rows ``start:stop`` (first axis) of a tensor's stored values (BF16 as uint16).

    Rows are contiguous in the file, so a large tensor can be read a slice at a
    time: memory is bounded by the slice, not the tensor.
    """
    data = read_span(path, *row_span(entry, start, stop))
    raw = np.frombuffer(data, dtype=np.dtype(DTYPES[entry.dtype][1]))
    return raw.reshape((stop - start, *entry.shape[1:]))


def row_span(entry: TensorEntry, start: int, stop: int) -> tuple[int, int]:
    """(file offset, byte count) of rows ``start:stop`` (first axis) of *entry*."""
    if not entry.shape or not 0 <= start <= stop <= entry.shape[0]:
        raise ValueError("row range outside the tensor")
    row_bytes = math.prod(entry.shape[1:]) * DTYPES[entry.dtype][0]
    return entry.begin + start * row_bytes, (stop - start) * row_bytes


def read_f32_rows(path: Path, entry: TensorEntry, start: int, stop: int) -> npt.NDArray[np.float32]:
    """Rows ``start:stop`` of a floating-point tensor, as float32 (see :func:`read_raw_rows`)."""
    return widen(read_raw_rows(path, entry, start, stop), entry.dtype)


def read_f32(path: Path, entry: TensorEntry) -> npt.NDArray[np.float32]:
    """Read one floating-point tensor as float32 (exact for F32, F16 and BF16)."""
    return widen(read_raw(path, entry), entry.dtype)
