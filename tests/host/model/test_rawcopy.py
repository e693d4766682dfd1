"""Stored-bytes passthrough is byte-identical to the float path, NaNs included.

The converter copies F32 / F16 / BF16 source bytes when the output type is the
same. That is exact except for NaN, whose quiet bit ``gguf.quants`` (and ggml) set;
a chunk with a NaN must therefore take the float path. These tests put signalling
and quiet NaNs into a plain and into a permuted (Llama q) tensor and check the
output against ``verify_gguf``, which recomputes every tensor with ``gguf.quants``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

from host.model.categories import OutType
from host.model.convert import convert
from host.model.rawcopy import NAN_LIMITS, Scratch
from host.model.verify_gguf import verify_gguf
from tests.host.model.helpers import Tensors, edit_weights

# bf16 bit patterns: signalling NaN, quiet NaN, negative signalling NaN, +inf
BF16_SPECIALS = np.array([0x7F81, 0x7FC0, 0xFF81, 0x7F80], dtype="<u2")
F16_SPECIALS = np.array([0x7C01, 0x7E00, 0xFC01, 0x7C00], dtype="<u2")


def _plant(dtype: str, specials: np.ndarray) -> Callable[[Tensors], None]:
    def edit(tensors: Tensors) -> None:
        for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"):
            stored_dtype, values = tensors[name]
            if dtype == "F16":
                assert stored_dtype == "BF16"
                widened = (values.astype(np.uint32) << 16).view(np.float32)
                values = widened.astype("<f2").view("<u2")
            values = values.copy()
            values.reshape(-1)[5 : 5 + specials.size] = specials
            tensors[name] = (dtype, values.view("<f2") if dtype == "F16" else values)

    return edit


@pytest.mark.parametrize(("dtype", "outtype"), [("BF16", "bf16"), ("F16", "f16")])
def test_nan_chunks_match_the_float_path(
    copy_of: Callable[[Path], Path], llama_dir: Path, tmp_path: Path, dtype: str, outtype: OutType
) -> None:
    source = copy_of(llama_dir)
    specials = BF16_SPECIALS if dtype == "BF16" else F16_SPECIALS
    edit_weights(source, _plant(dtype, specials))
    result = convert(source, tmp_path / "out", outtype)
    verify_gguf(result.path, source, outtype, expected_sha256=result.sha256)
    reader = gguf.GGUFReader(result.path)
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    stored = np.asarray(embd.data).reshape(-1).view("<u2")[5 : 5 + specials.size]
    if dtype == "BF16":  # gguf.quants, like ggml, sets the quiet bit of a NaN
        assert stored.tolist() == [0x7FC1, 0x7FC0, 0xFFC1, 0x7F80]
    else:  # numpy's f16 -> f32 -> f16 keeps the payload
        assert stored.tolist() == specials.tolist()


@pytest.mark.parametrize("dtype", ["BF16", "F16"])
def test_has_nan_agrees_with_isnan_on_every_pattern(dtype: str) -> None:
    """Each of the 65,536 bit patterns alone, and all of them with the NaNs removed."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    if dtype == "BF16":
        expected = np.isnan((bits.astype(np.uint32) << 16).view(np.float32))
    else:
        expected = np.isnan(bits.view(np.float16))
    limits = NAN_LIMITS[dtype]
    assert limits is not None
    got = [Scratch.has_nan(bits[i : i + 1], *limits) for i in range(bits.size)]
    assert got == expected.tolist()
    assert not Scratch.has_nan(bits[~expected], *limits)
    assert Scratch.has_nan(bits, *limits)
