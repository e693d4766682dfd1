"""Our safetensors header parser: each refusal, and exact reads of every dtype we use."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors

from host.model.categories import HeaderError
from host.model.safetensors_header import (
    MAX_HEADER_BYTES,
    parse_header,
    read_f32,
    read_f32_rows,
    read_raw,
)
from host.model.synth import f32_to_bf16_bits, safetensors_bytes

# the Rust reference parser; its stub is untyped
DESERIALIZE: Callable[[bytes], list[tuple[str, dict[str, Any]]]] = safetensors.deserialize


def _raw_file(path: Path, header: Any, data: bytes = b"", length: int | None = None) -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    size = len(text) if length is None else length
    path.write_bytes(struct.pack("<Q", size) + text + data)
    return path


def _refused(path: Path) -> str:
    with pytest.raises(HeaderError) as info:
        parse_header(path)
    return info.value.category


def _entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_valid_file_round_trips_every_float_dtype(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    f16 = f32.astype(np.float16)
    bf16 = f32_to_bf16_bits(f32)
    path = tmp_path / "ok.safetensors"
    path.write_bytes(safetensors_bytes({"a": ("F32", f32), "b": ("F16", f16), "c": ("BF16", bf16)}))
    header = parse_header(path)
    assert header.metadata == {"format": "pt"}
    assert np.array_equal(read_f32(path, header.tensors["a"]), f32)
    assert np.array_equal(read_f32(path, header.tensors["b"]), f16.astype(np.float32))
    widened = read_f32(path, header.tensors["c"])
    assert np.array_equal(widened.view(np.uint32) >> 16, bf16.astype(np.uint32))
    assert np.all(np.abs(widened - f32) <= np.abs(f32) * 2**-8)
    assert np.array_equal(read_raw(path, header.tensors["c"]), bf16)
    # the Rust reference parser agrees on layout and bytes
    reference = dict(DESERIALIZE(path.read_bytes()))
    for name, entry in header.tensors.items():
        assert bytes(reference[name]["data"]) == read_raw(path, entry).tobytes()


def test_truncated_prefix(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_bytes(b"\x01\x02\x03")
    assert _refused(path) == "header_truncated"


def test_oversized_header_beyond_limit(tmp_path: Path) -> None:
    """The file is long enough to hold the header: only the size limit refuses it."""
    path = tmp_path / "big"
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{")
        handle.truncate(8 + MAX_HEADER_BYTES + 1 + 16)  # sparse
    assert _refused(path) == "header_oversized"


def test_header_longer_than_file(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "long", {}, length=1000)
    assert _refused(path) == "header_oversized"


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"\xff\xfe{}", b"[1, 2]", b'"text"'],
    ids=["syntax", "utf8", "list", "str"],
)
def test_bad_json(tmp_path: Path, raw: bytes) -> None:
    assert _refused(_raw_file(tmp_path / "bad", raw)) == "header_bad_json"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": {"dtype": "U8", "shape": [NaN], "data_offsets": [0, 1]}}',
        b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, Infinity]}}',
        b'{"a": {"dtype": "U8", "shape": [1e999], "data_offsets": [0, 1]}}',
        b'{"__metadata__": {"x": -1e999}, "a": {"dtype": "U8", "shape": [1], '
        b'"data_offsets": [0, 1]}}',
        b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
    ids=["nan", "infinity", "overflow", "metadata-overflow", "deep"],
)
def test_not_strict_json(tmp_path: Path, raw: bytes) -> None:
    """Not JSON by receipts.strictjson's definition: header_bad_json, not a later
    category (and no RecursionError escaping for a deeply nested header)."""
    assert _refused(_raw_file(tmp_path / "ns", raw, b"\0")) == "header_bad_json"


def test_duplicate_key(tmp_path: Path) -> None:
    one = json.dumps(_entry("U8", [1], 0, 1))
    raw = ('{"a": ' + one + ', "a": ' + one + "}").encode()
    assert _refused(_raw_file(tmp_path / "dup", raw, b"\0")) == "header_duplicate_key"


@pytest.mark.parametrize(
    "entry",
    [
        {"dtype": "F32", "shape": [1]},
        {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1},
        {"dtype": 7, "shape": [1], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [1], "data_offsets": [0]},
        {"dtype": "F32", "shape": [1], "data_offsets": [0, 4.0]},
        "not an object",
    ],
    ids=["no-offsets", "extra", "dtype-int", "neg-dim", "bool-dim", "one-offset", "float", "str"],
)
def test_bad_entry(tmp_path: Path, entry: Any) -> None:
    path = _raw_file(tmp_path / "e", {"a": entry}, b"\0" * 4)
    assert _refused(path) == "header_bad_entry"


def test_bad_metadata(tmp_path: Path) -> None:
    header = {"__metadata__": {"format": 1}, "a": _entry("U8", [1], 0, 1)}
    assert _refused(_raw_file(tmp_path / "m", header, b"\0")) == "header_bad_entry"


def test_unknown_dtype(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "u", {"a": _entry("F8_E4M3", [4], 0, 4)}, b"\0" * 4)
    assert _refused(path) == "unknown_dtype"


def test_shape_size_mismatch(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "s", {"a": _entry("F32", [2], 0, 4)}, b"\0" * 4)
    assert _refused(path) == "shape_size_mismatch"


def test_offsets_past_end_of_file(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "o", {"a": _entry("F32", [2], 0, 8)}, b"\0" * 4)
    assert _refused(path) == "offsets_out_of_range"


def test_offsets_reversed(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "r", {"a": _entry("U8", [0], 4, 0)}, b"\0" * 4)
    assert _refused(path) == "offsets_out_of_range"


def test_offsets_overlap(tmp_path: Path) -> None:
    header = {"a": _entry("F32", [2], 0, 8), "b": _entry("F32", [1], 4, 8)}
    assert _refused(_raw_file(tmp_path / "ov", header, b"\0" * 8)) == "offsets_overlap"


def test_offsets_gap_between_tensors(tmp_path: Path) -> None:
    header = {"a": _entry("F32", [1], 0, 4), "b": _entry("F32", [1], 8, 12)}
    assert _refused(_raw_file(tmp_path / "g", header, b"\0" * 12)) == "offsets_gap"


def test_trailing_bytes_after_last_tensor(tmp_path: Path) -> None:
    header = {"a": _entry("F32", [1], 0, 4)}
    assert _refused(_raw_file(tmp_path / "tail", header, b"\0" * 5)) == "offsets_gap"


def test_integer_tensor_is_not_read_as_float(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "i", {"a": _entry("I32", [1], 0, 4)}, b"\0" * 4)
    entry = parse_header(path).tensors["a"]
    assert read_raw(path, entry).tolist() == [0]
    with pytest.raises(HeaderError) as info:
        read_f32(path, entry)
    assert info.value.category == "unknown_dtype"


def test_file_shrunk_after_parse_is_refused_on_read(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "shrink", {"a": _entry("F32", [2], 0, 8)}, b"\0" * 8)
    entry = parse_header(path).tensors["a"]
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size - 4)
    with pytest.raises(HeaderError) as info:
        read_raw(path, entry)
    assert info.value.category == "offsets_out_of_range"


def test_row_slices_equal_whole_tensor_rows(tmp_path: Path) -> None:
    values = np.arange(24, dtype=np.float32).reshape(6, 4)
    path = tmp_path / "rows.safetensors"
    path.write_bytes(
        safetensors_bytes({"a": ("BF16", f32_to_bf16_bits(values)), "b": ("F32", values)})
    )
    header = parse_header(path)
    for name in ("a", "b"):
        whole = read_f32(path, header.tensors[name])
        assert np.array_equal(read_f32_rows(path, header.tensors[name], 2, 5), whole[2:5])
        assert read_f32_rows(path, header.tensors[name], 6, 6).shape == (0, 4)
        for start, stop in ((5, 7), (-1, 2), (3, 2)):
            with pytest.raises(ValueError, match="row range"):
                read_f32_rows(path, header.tensors[name], start, stop)
