"""llama.cpp on our GGUFs agrees with the source model (integration: real llama.cpp).

- Logits: a numpy float64 forward pass of the Hugging Face architecture on the
  *source* weights against llama.cpp on the converted file: max |delta logit| <= 1e-4
  at f32, 100% argmax agreement at f16 and bf16 for both architectures (and q8_0
  for Qwen3), over >= 32 positions. At f16 / bf16 / q8_0 the reference models what
  ggml's CPU backend computes (stored weights, activations rounded to the weight's
  vec_dot type before each matrix product; see reference_forward.py), so agreement
  is not left to the margins of near-tied logits. The Llama model's bounds are what
  prove the q/k permutation.
- Tokenization: llama.cpp's tokenizer, rebuilt from our metadata, equals the
  ``tokenizers`` tokenization of mixed text (code, unicode, special tokens).
- Quantization: ``gguf.quants`` (used by the converter) is byte-exact with ggml's own
  ``ggml_quantize_chunk`` for F16, BF16 and Q8_0.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import gguf
import llama_cpp
import numpy as np
import numpy.typing as npt
import pytest
from tokenizers import Tokenizer

from host.model.categories import OutType
from host.model.convert import convert
from tests.host.model.reference_forward import ReferenceModel, Storage

pytestmark = pytest.mark.integration

MIXED_TEXT = (
    "<|im_start|>system\nYou are a coding agent.<|im_end|>\n"
    "<|im_start|>user\nFix `add` in src/app.py: I've seen 3.14159 != 2.71828!<|im_end|>\n"
    "<|im_start|>assistant\n<tool_call>\n"
    '{"name": "edit", "arguments": {"filePath": "src/app.py", "oldString": "a - b"}}\n'
    "</tool_call><|im_end|>\n"
    "def add(a: int, b: int) -> int:\n\treturn a + b  # naïve café, Straße\n"
    "    \n\n  日本語のテキスト 中文 한국어 Ελληνικά 🙂🚀 ✓→∑ 12345678 '''x''' \r\n"
    "<|endoftext|>"
)


class Runner(Protocol):
    """Convert *source* at *outtype*, evaluate the mixed text; (logits, model)."""

    def __call__(
        self, source: Path, outtype: OutType
    ) -> tuple[npt.NDArray[np.float64], llama_cpp.Llama]: ...


def _tokens(source: Path) -> list[int]:
    return Tokenizer.from_file(str(source / "tokenizer.json")).encode(MIXED_TEXT).ids


def _load(path: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(
        model_path=str(path),
        n_ctx=256,
        n_batch=256,
        n_threads=1,
        n_threads_batch=1,
        logits_all=True,
        type_k=llama_cpp.GGML_TYPE_F32,
        type_v=llama_cpp.GGML_TYPE_F32,
        flash_attn=False,
        verbose=False,
    )


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Runner]:
    """Convert, load in llama.cpp, evaluate all positions; close models afterwards."""
    opened: list[llama_cpp.Llama] = []

    def go(source: Path, outtype: OutType) -> tuple[npt.NDArray[np.float64], llama_cpp.Llama]:
        result = convert(source, tmp_path / f"{source.name}-{outtype}", outtype)
        llm = _load(result.path)
        opened.append(llm)
        tokens = _tokens(source)
        llm.eval(tokens)
        return np.array(llm.scores[: len(tokens)], dtype=np.float64), llm

    yield go
    for llm in opened:
        llm.close()


def _reference(source: Path, storage: Storage = "f32") -> npt.NDArray[np.float64]:
    return ReferenceModel(source, storage).logits(_tokens(source))


def test_enough_positions(tiny_dir: Path) -> None:
    assert len(_tokens(tiny_dir)) >= 32


@pytest.mark.parametrize("model", ["qwen3", "llama"])
def test_f32_logits_within_1e_4(request: pytest.FixtureRequest, run: Runner, model: str) -> None:
    source: Path = request.getfixturevalue("tiny_dir" if model == "qwen3" else "llama_dir")
    got, _ = run(source, "f32")
    expected = _reference(source)
    assert got.shape == expected.shape
    assert float(np.max(np.abs(expected))) > 5.0  # logits are not all near zero
    assert float(np.max(np.abs(got - expected))) <= 1e-4


@pytest.mark.parametrize(
    ("model", "outtype"),
    [("qwen3", "f16"), ("qwen3", "bf16"), ("qwen3", "q8_0"), ("llama", "f16"), ("llama", "bf16")],
)
def test_argmax_agrees(
    request: pytest.FixtureRequest, run: Runner, model: str, outtype: Storage
) -> None:
    source: Path = request.getfixturevalue("tiny_dir" if model == "qwen3" else "llama_dir")
    got, _ = run(source, outtype)
    expected = _reference(source, outtype)
    assert len(expected) >= 32
    assert got.shape == expected.shape
    assert np.array_equal(got.argmax(axis=-1), expected.argmax(axis=-1))


@pytest.mark.parametrize("model", ["qwen3", "llama"])
def test_tokenization_matches_tokenizers(
    request: pytest.FixtureRequest, run: Runner, model: str
) -> None:
    source: Path = request.getfixturevalue("tiny_dir" if model == "qwen3" else "llama_dir")
    _, llm = run(source, "q8_0")
    reference = Tokenizer.from_file(str(source / "tokenizer.json"))
    for text in (MIXED_TEXT, MIXED_TEXT.replace("<|", "< |"), "  leading and trailing  ", "x"):
        expected = reference.encode(text).ids
        got = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        assert got == expected, text
        assert llm.detokenize(got, special=True).decode("utf-8") == text
    specials = reference.encode("<|im_start|><|im_end|><tool_call></tool_call>").ids
    assert specials == [1020, 1021, 1022, 1023]
    assert llm.token_eos() == 1021
    assert llm.token_bos() == 1019


def _ggml_quantize(values: npt.NDArray[np.float32], qtype: gguf.GGMLQuantizationType) -> bytes:
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    fn = lib.ggml_quantize_chunk
    fn.restype = ctypes.c_size_t
    fn.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    rows, per_row = values.shape
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    out = ctypes.create_string_buffer(rows * per_row // block * type_size)
    src = np.ascontiguousarray(values, dtype=np.float32)
    written = fn(int(qtype), src.ctypes.data, ctypes.addressof(out), 0, rows, per_row, None)
    assert written == len(out.raw)
    return out.raw


@pytest.mark.parametrize(
    "qtype",
    [gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16, gguf.GGMLQuantizationType.Q8_0],
    ids=lambda q: q.name,
)
def test_gguf_quants_byte_exact_with_ggml(qtype: gguf.GGMLQuantizationType) -> None:
    rng = np.random.default_rng(7)
    values = (rng.standard_normal((16, 256)) * rng.uniform(1e-4, 30.0, (16, 1))).astype(np.float32)
    values[0, :32] = 0.0  # an all-zero Q8_0 block
    values[1, :8] = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, -0.5, 0.5, 127.5, -127.5, 1e-8, 6e4])
    ours = np.ascontiguousarray(gguf.quants.quantize(values, qtype)).tobytes()
    assert ours == _ggml_quantize(values, qtype)
