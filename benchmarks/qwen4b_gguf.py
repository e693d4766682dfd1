"""A full-size Qwen3-4B-shaped GGUF with random bf16 weights, written one tensor at a time.

Why: the qwen4b memory envelope (docs/qwen4b-memory.md) must be measured on a model of
the real size and layout, and no weights can be downloaded here. Memory depends on the
tensors' shapes and types, the vocabulary and the context, not on the weights' values,
so random weights of the right shapes are a faithful stand-in. The tensor set, names,
order and types are those llama.cpp's `convert_hf_to_gguf.py` writes for Qwen3-4B at
`--outtype bf16` (398 tensors, tied embeddings: no `output.weight`; norms in f32), the
vocabulary is the real 151,936-token Qwen one from the vocab-only GGUF inside the pinned
llama-cpp-python sdist (benchmarks/bench_worker.fetch_vocab).

Streaming: each tensor is declared first and its bytes written afterwards, so peak
memory is one tensor (the 778 MB embedding), not the 8 GB file.

Run: `.venv/bin/python -m benchmarks.qwen4b_gguf OUT.gguf [--sdist PATH | --vocab GGUF]` prints the
file's size and SHA-256 as one JSON line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Shape:
    """Qwen3-4B's config.json figures (the ones that decide memory)."""

    hidden: int = 2560
    layers: int = 36
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 9728
    context: int = 262_144
    rope_theta: float = 1e6


def _bf16_pool(seed: int, count: int) -> npt.NDArray[np.uint16]:
    """`count` bf16 values around N(0, 0.02), as raw bits (the top half of each f32)."""
    values = (np.random.default_rng(seed).standard_normal(count) * 0.02).astype(np.float32)
    bits: npt.NDArray[np.uint16] = (values.view(np.uint32) >> 16).astype(np.uint16)
    return bits


def tensor_plan(shape: Shape, n_vocab: int) -> list[tuple[str, tuple[int, ...], bool]]:
    """(name, numpy shape, is_bf16) in llama.cpp's order for Qwen3 (tied embeddings)."""
    h, q, kv, ff = (
        shape.hidden,
        shape.heads * shape.head_dim,
        shape.kv_heads * shape.head_dim,
        shape.ffn,
    )
    plan: list[tuple[str, tuple[int, ...], bool]] = [("token_embd.weight", (n_vocab, h), True)]
    for i in range(shape.layers):
        p = f"blk.{i}."
        plan += [
            (p + "attn_norm.weight", (h,), False),
            (p + "ffn_down.weight", (h, ff), True),
            (p + "ffn_gate.weight", (ff, h), True),
            (p + "ffn_up.weight", (ff, h), True),
            (p + "ffn_norm.weight", (h,), False),
            (p + "attn_k_norm.weight", (shape.head_dim,), False),
            (p + "attn_k.weight", (kv, h), True),
            (p + "attn_output.weight", (h, q), True),
            (p + "attn_q_norm.weight", (shape.head_dim,), False),
            (p + "attn_q.weight", (q, h), True),
            (p + "attn_v.weight", (kv, h), True),
        ]
    plan.append(("output_norm.weight", (h,), False))
    return plan


def write_full_size(vocab_gguf: Path, out: Path, shape: Shape = Shape()) -> int:
    """Write the GGUF; return its size in bytes."""
    reader = gguf.GGUFReader(vocab_gguf)
    writer = gguf.GGUFWriter(out, "qwen3")
    n_vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        value = field.contents()
        if field.name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    writer.add_block_count(shape.layers)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.hidden)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    plan = tensor_plan(shape, n_vocab)
    for name, dims, bf16 in plan:
        count = int(np.prod(dims))
        if bf16:
            writer.add_tensor_info(
                name, dims, np.dtype(np.uint16), count * 2, raw_dtype=gguf.GGMLQuantizationType.BF16
            )
        else:
            writer.add_tensor_info(name, dims, np.dtype(np.float32), count * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    pool = _bf16_pool(0, 1 << 24)
    offset = 0
    for _name, dims, bf16 in plan:
        count = int(np.prod(dims))
        if not bf16:
            writer.write_tensor_data(np.ones(dims, dtype=np.float32))
            continue
        data = np.empty(count, dtype=np.uint16)
        done = 0
        while done < count:  # the pool, tiled from a rolling offset: no two tensors alike
            take = min(count - done, pool.size - offset)
            data[done : done + take] = pool[offset : offset + take]
            done += take
            offset = (offset + take) % pool.size
        writer.write_tensor_data(data.reshape(dims))
    writer.close()
    return out.stat().st_size


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


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
        size = write_full_size(args.vocab, args.out)
    print(json.dumps({"bytes": size, "sha256": sha256_file(args.out)}))


if __name__ == "__main__":
    main()
