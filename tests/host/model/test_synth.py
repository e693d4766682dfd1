"""The tiny checkpoints are byte-identical across runs, directories and processes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors
from tokenizers import Tokenizer

from host.model.pins import format_pins_toml, pins_of
from host.model.safetensors_header import parse_header, read_f32, read_raw
from host.model.synth import (
    QWEN3_TINY,
    SPECIAL_TOKENS,
    TOOL_TOKENS,
    VOCAB_SIZE,
    build_tokenizer,
    f32_to_bf16_bits,
    synthesize_tiny,
    synthesize_tiny_llama,
)

# the Rust reference parser; its stub is untyped
DESERIALIZE: Callable[[bytes], list[tuple[str, dict[str, Any]]]] = safetensors.deserialize

EXPECTED_FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]


def _digests(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def test_two_directories_are_byte_identical(tmp_path: Path, tiny_dir: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "deeper" / "b"
    pins_a = synthesize_tiny(a)
    pins_b = synthesize_tiny(b)
    assert sorted(p.name for p in a.iterdir()) == EXPECTED_FILES
    assert _digests(a) == _digests(b) == _digests(tiny_dir)
    assert pins_a == pins_b == pins_of(tiny_dir)


def test_llama_is_deterministic_and_differs(
    tmp_path: Path, llama_dir: Path, tiny_dir: Path
) -> None:
    synthesize_tiny_llama(tmp_path / "l")
    assert _digests(tmp_path / "l") == _digests(llama_dir)
    assert _digests(llama_dir)["model.safetensors"] != _digests(tiny_dir)["model.safetensors"]


def test_other_process_other_hash_seed_and_threads_same_bytes(
    tmp_path: Path, tiny_dir: Path
) -> None:
    """Tokenizer training runs on rayon threads: prove the bytes do not depend on them."""
    out = tmp_path / "proc"
    env = dict(os.environ, PYTHONHASHSEED="12345", RAYON_NUM_THREADS="1")
    subprocess.run(
        [sys.executable, "-m", "host.model.synth", str(out)],
        check=True,
        env=env,
        capture_output=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert _digests(out) == _digests(tiny_dir)


def test_refuses_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("x")
    with pytest.raises(FileExistsError):
        synthesize_tiny(tmp_path)


def test_config_has_head_dim_distinct_from_hidden_over_heads(tiny_dir: Path) -> None:
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["model_type"] == "qwen3"
    assert config["head_dim"] == 32 != config["hidden_size"] // config["num_attention_heads"]
    assert config["vocab_size"] == VOCAB_SIZE
    assert config["tie_word_embeddings"] is True
    assert config["rope_theta"] == 1e6


def test_tokenizer_has_qwen_specials_at_the_end(tiny_dir: Path) -> None:
    tok = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    assert tok.get_vocab_size() == VOCAB_SIZE
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS + TOOL_TOKENS]
    assert ids == list(range(VOCAB_SIZE - 5, VOCAB_SIZE))
    text = "<|im_start|>user\nhi<|im_end|><tool_call>{}</tool_call>"
    encoded = tok.encode(text).ids
    for token_id in ids[1:]:
        assert token_id in encoded
    assert tok.decode(encoded, skip_special_tokens=False) == text


def test_tokenizer_training_is_repeatable() -> None:
    assert build_tokenizer().to_str() == build_tokenizer().to_str()


def test_weights_are_bf16_readable_by_reference_parser(tiny_dir: Path) -> None:
    """The Rust safetensors parser accepts our file and sees the same bytes we do."""
    path = tiny_dir / "model.safetensors"
    reference = dict(DESERIALIZE(path.read_bytes()))
    header = parse_header(path)
    assert set(reference) == set(header.tensors)
    for name, entry in header.tensors.items():
        assert reference[name]["dtype"] == "BF16"
        assert tuple(reference[name]["shape"]) == entry.shape
        assert bytes(reference[name]["data"]) == read_raw(path, entry).tobytes()
    norm = read_f32(path, header.tensors["model.norm.weight"])
    assert float(norm.min()) > 0.75
    assert float(norm.max()) < 1.25
    assert "lm_head.weight" not in header.tensors  # tied
    assert header.tensors["model.layers.0.self_attn.q_proj.weight"].shape == (
        QWEN3_TINY.heads * QWEN3_TINY.head_dim,
        QWEN3_TINY.hidden,
    )


def test_bf16_rounding_is_nearest_even() -> None:
    values = np.array(
        [1.0, 1.00390625, 1.01171875, -2.5, 3.0e-3, 65504.0], dtype=np.float32
    )  # 1+2^-8 is a tie (rounds down to even), 1+3*2^-8 a tie that rounds up
    bits = f32_to_bf16_bits(values)
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    assert back[0] == 1.0
    assert back[1] == 1.0
    assert back[2] == np.float32(1.015625)
    assert back[3] == -2.5
    assert abs(back[4] - 3.0e-3) / 3.0e-3 < 2**-8
    assert back[5] == 65536.0


def test_pins_print_as_toml(tiny_dir: Path) -> None:
    text = format_pins_toml(pins_of(tiny_dir))
    assert text.count("[[model.pins]]") == 4
    digest = hashlib.sha256((tiny_dir / "model.safetensors").read_bytes()).hexdigest()
    assert f'sha256 = "{digest}"' in text
