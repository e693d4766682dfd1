"""A full-size Qwen3-4B-shaped Hugging Face snapshot with random bf16 weights.

Why: pin, prepare and the whole qwen4b trial must be measured on a checkpoint of the
real size and layout, and no weights can be downloaded here. Time and memory depend on
the bytes' count, the tensors' shapes and dtypes, the sharding and the vocabulary, not
on the weights' values, so random weights of the right shapes are a faithful stand-in.

What is written (the layout of Qwen/Qwen3-4B-Instruct-2507's snapshot):
- three shards ``model-0000N-of-00003.safetensors`` (state-dict order, a new shard when
  the next tensor would pass 4 GB; each shard's tensors in name order, as the
  ``safetensors`` writer lays out one dtype) and ``model.safetensors.index.json``;
- 398 bf16 tensors (hidden 2,560, 36 layers, 32 heads, 8 KV heads, head_dim 128,
  FFN 9,728), tied embeddings (no ``lm_head.weight``), 8.05 GB in all;
- ``tokenizer.json`` with the real 151,643-token Qwen BPE vocabulary and its 151,387
  merges (from the vocab-only GGUF in the pinned llama-cpp-python sdist), Qwen's three
  special tokens and the 23 added tokens Qwen3 declares, in their real ids;
- ``config.json`` (``vocab_size`` 151,936), ``tokenizer_config.json`` (the chat template
  of host/model/synth.py), ``generation_config.json`` (Qwen3's sampling defaults).

Streaming: each shard's header is computed from the shapes, then every tensor is filled
from one 32 MiB pool of random bf16 values at a rolling offset and written, so peak
memory is one tensor (the 778 MB embedding), not the 8 GB.

Run: ``.venv/bin/python -m benchmarks.qwen4b_snapshot OUT_DIR [--vocab GGUF | --sdist PATH]``.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

import gguf
import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE

from benchmarks.qwen4b_gguf import Shape, _bf16_pool
from host.model.synth import CHAT_TEMPLATE
from host.model.vocab import QWEN2_PRETOKENIZER_REGEX

VOCAB_SIZE = 151_936
SHARD_BYTES = 4_000_000_000
QWEN3_4B = Shape()
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Qwen3's added tokens after the three specials, ids 151,646..151,668 (tokenizer.json of
# the Qwen3 releases); the <...|> ones are special, the tag-like ones are not.
ADDED = (
    "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
    "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
    "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)  # fmt: skip
GENERATION_CONFIG = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.7,
    "top_k": 20,
    "top_p": 0.8,
    "transformers_version": "4.51.0",
}


def hf_tensors(shape: Shape = QWEN3_4B) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) in a transformers state dict's order (embedding, layers, norm)."""
    h, hd, ff = shape.hidden, shape.head_dim, shape.ffn
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (VOCAB_SIZE, h))]
    for layer in range(shape.layers):
        p = f"model.layers.{layer}."
        out += [
            (p + "self_attn.q_proj.weight", (shape.heads * hd, h)),
            (p + "self_attn.k_proj.weight", (shape.kv_heads * hd, h)),
            (p + "self_attn.v_proj.weight", (shape.kv_heads * hd, h)),
            (p + "self_attn.o_proj.weight", (h, shape.heads * hd)),
            (p + "self_attn.q_norm.weight", (hd,)),
            (p + "self_attn.k_norm.weight", (hd,)),
            (p + "mlp.gate_proj.weight", (ff, h)),
            (p + "mlp.up_proj.weight", (ff, h)),
            (p + "mlp.down_proj.weight", (h, ff)),
            (p + "input_layernorm.weight", (h,)),
            (p + "post_attention_layernorm.weight", (h,)),
        ]
    out.append(("model.norm.weight", (h,)))
    return out


def shards(tensors: list[tuple[str, tuple[int, ...]]]) -> list[list[tuple[str, tuple[int, ...]]]]:
    """Split in order, a new shard when the next tensor would pass SHARD_BYTES."""
    groups: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for name, dims in tensors:
        nbytes = 2 * math.prod(dims)
        if groups[-1] and size + nbytes > SHARD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append((name, dims))
        size += nbytes
    return groups


def _header(group: list[tuple[str, tuple[int, ...]]]) -> bytes:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dims in sorted(group):
        nbytes = 2 * math.prod(dims)
        span = [offset, offset + nbytes]
        header[name] = {"dtype": "BF16", "shape": list(dims), "data_offsets": span}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text


class _Filler:
    """Random bf16 bits, tiled from one pool at a rolling offset (no two tensors alike)."""

    def __init__(self) -> None:
        self.pool = _bf16_pool(0, 1 << 24)
        self.offset = 0

    def write(self, out: BinaryIO, count: int) -> None:
        while count:
            take = min(count, self.pool.size - self.offset)
            out.write(self.pool[self.offset : self.offset + take].data.cast("B"))
            count -= take
            self.offset = (self.offset + take) % self.pool.size


def build_tokenizer(vocab_gguf: Path) -> Tokenizer:
    """Qwen's byte-level BPE from the vocab-only GGUF: tokens, merges, added tokens."""
    reader = gguf.GGUFReader(vocab_gguf)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    normal = {text: i for i, text in enumerate(tokens) if types[i] == gguf.TokenType.NORMAL}
    if sorted(normal.values()) != list(range(len(normal))):
        raise ValueError("the vocabulary's normal tokens are not the first ids")
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tokenizer = Tokenizer(BPE(vocab=normal, merges=pairs, unk_token=None, byte_fallback=False))
    tokenizer.normalizer = None
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZER_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    for text in SPECIAL + ADDED:  # one at a time: each takes the next id
        if text.startswith("<|"):
            tokenizer.add_special_tokens([AddedToken(text, special=True, normalized=False)])
        else:  # add_special_tokens would mark it special, unlike tokenizer_config.json
            tokenizer.add_tokens([AddedToken(text, special=False, normalized=False)])
    if tokenizer.token_to_id("</think>") != len(normal) + len(SPECIAL) + len(ADDED) - 1:
        raise ValueError("added tokens did not take Qwen3's ids")
    return tokenizer


def _json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_tokenizer(out_dir: Path, vocab_gguf: Path) -> None:
    """Rewrite only ``tokenizer.json`` (the weights do not depend on it)."""
    tokenizer = build_tokenizer(vocab_gguf)
    (out_dir / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")


def synthesize_snapshot(out_dir: Path, vocab_gguf: Path, shape: Shape = QWEN3_4B) -> int:
    """Write the snapshot into *out_dir* (empty or absent); return its weights' bytes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise FileExistsError("output directory is not empty")
    tokenizer = build_tokenizer(vocab_gguf)
    decoder = {
        str(tokenizer.token_to_id(t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t.startswith("<|"),
        }
        for t in SPECIAL + ADDED
    }
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "hidden_size": shape.hidden,
        "initializer_range": 0.02,
        "intermediate_size": shape.ffn,
        "max_position_embeddings": shape.context,
        "model_type": "qwen3",
        "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers,
        "num_key_value_heads": shape.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": shape.rope_theta,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": VOCAB_SIZE,
    }
    _json(out_dir / "config.json", config)
    _json(out_dir / "generation_config.json", GENERATION_CONFIG)
    (out_dir / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    _json(
        out_dir / "tokenizer_config.json",
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": decoder,
            "bos_token": None,
            "chat_template": CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": shape.context,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        },
    )
    groups = shards(hf_tensors(shape))
    filler = _Filler()
    weight_map: dict[str, str] = {}
    total = 0
    for number, group in enumerate(groups, start=1):
        name = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        with (out_dir / name).open("wb") as out:
            out.write(_header(group))
            for tensor, dims in sorted(group):
                if len(dims) == 1:  # norms: ones, as a freshly initialized RMSNorm
                    out.write(np.full(dims, 0x3F80, dtype=np.uint16).tobytes())
                else:
                    filler.write(out, math.prod(dims))
                weight_map[tensor] = name
                total += 2 * math.prod(dims)
    _json(
        out_dir / "model.safetensors.index.json",
        {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
    )
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sdist", type=Path, help="a local llama-cpp-python 0.3.36 sdist")
    parser.add_argument("--vocab", type=Path, help="ggml-vocab-qwen2.gguf already extracted")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        if args.vocab is None:
            from benchmarks.bench_worker import fetch_vocab  # imports llama_cpp: only when needed

            args.vocab = fetch_vocab(Path(work), args.sdist)
        total = synthesize_snapshot(args.out, args.vocab)
    print(json.dumps({"weights_bytes": total}))


if __name__ == "__main__":
    main()
