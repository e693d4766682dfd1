"""Tiny checkpoints with the shapes where our converter could differ from llama.cpp's.

Each builder takes a freshly synthesized tiny checkpoint (Qwen3 or Llama, as named)
and reshapes it in place. Used by ``test_llamacpp_divergences.py`` (expectations from
llama.cpp's code) and by ``benchmarks/conversion_parity.py cases`` (llama.cpp's
converter itself, where torch is available).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from host.model.safetensors_header import bf16_bits_to_f32
from host.model.synth import safetensors_bytes, synthesize_tiny, synthesize_tiny_llama
from tests.host.model.helpers import Tensors, edit_json, edit_weights, load_tensors

BOS = "<|endoftext|>"


def tied_lm_head(root: Path) -> None:
    """Qwen3 with ``tie_word_embeddings`` true that still stores ``lm_head.weight``
    (the embedding's rows reversed, so the two matrices differ)."""

    def add_head(t: Tensors) -> None:
        dtype, embed = t["model.embed_tokens.weight"]
        t["lm_head.weight"] = (dtype, embed[::-1].copy())

    edit_weights(root, add_head)


def mixed_dtypes(root: Path) -> list[str]:
    """Norms stored as F32, the rest BF16, header and data grouped by dtype (F32 first,
    then by name) as the ``safetensors`` writer lays them out. Returns that order."""
    tensors = load_tensors(root / "model.safetensors")
    for name, (_dtype, bits) in list(tensors.items()):
        if bits.ndim == 1:
            tensors[name] = ("F32", bf16_bits_to_f32(bits))
    order = sorted(tensors, key=lambda n: (tensors[n][0] != "F32", n))
    (root / "model.safetensors").write_bytes(safetensors_bytes(tensors, order))
    return order


def llama3_post_processor(bos_id: int) -> dict[str, Any]:
    """Llama 3's ``post_processor``: ByteLevel, then ``BOS $A`` / ``BOS $A BOS $B``."""
    bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
    return {
        "type": "Sequence",
        "processors": [
            {
                "type": "ByteLevel",
                "add_prefix_space": True,
                "trim_offsets": False,
                "use_regex": True,
            },
            {
                "type": "TemplateProcessing",
                "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [
                    bos,
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": BOS, "type_id": 1}},
                    {"Sequence": {"id": "B", "type_id": 1}},
                ],
                "special_tokens": {BOS: {"id": BOS, "ids": [bos_id], "tokens": [BOS]}},
            },
        ],
    }


def llama3_tokenizer(root: Path) -> None:
    """Llama with a Llama-3-style post-processor and ``bos_token`` declared (its
    ``tokenizer_config.json`` still says ``add_bos_token: false``)."""
    tokenizer = json.loads((root / "tokenizer.json").read_text(encoding="utf-8"))
    bos_id = next(t["id"] for t in tokenizer["added_tokens"] if t["content"] == BOS)
    post = llama3_post_processor(bos_id)
    edit_json(root / "tokenizer.json", lambda t: t.__setitem__("post_processor", post))
    edit_json(
        root / "tokenizer_config.json",
        lambda c: c.update(bos_token=BOS, add_bos_token=False),
    )


def byte_level_over_config(root: Path) -> None:
    """Qwen3 (ByteLevel post-processor) whose ``tokenizer_config.json`` asks for BOS."""
    edit_json(root / "tokenizer_config.json", lambda c: c.update(add_bos_token=True))


QWEN3_GENERATION = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.7,
    "top_k": 20,
    "top_p": 0.8,
    "repetition_penalty": 1.05,
    "transformers_version": "4.51.0",
}


def generation_config(root: Path) -> None:
    """Qwen3 with a Qwen3-style ``generation_config.json``."""
    (root / "generation_config.json").write_text(json.dumps(QWEN3_GENERATION, indent=2))


QWEN3_CARD = """---
library_name: transformers
license: apache-2.0
license_link: https://huggingface.co/Qwen/Qwen3-4B-Instruct-2507/blob/main/LICENSE
pipeline_tag: text-generation
tags:
- chat
language:
- en
- no
---

# Qwen3-4B-Instruct-2507 (a test card)
"""


def model_card(root: Path) -> None:
    """Qwen3 with a model card whose front matter has license, link, tags, languages
    (and ``- no``, the YAML "Norway problem" llama.cpp works around)."""
    (root / "README.md").write_text(QWEN3_CARD, encoding="utf-8")


CASES: dict[str, tuple[Callable[[Path], object], Callable[[Path], object]]] = {
    "qwen3-tied-lm-head": (synthesize_tiny, tied_lm_head),
    "qwen3-mixed-dtypes": (synthesize_tiny, mixed_dtypes),
    "llama-llama3-tokenizer": (synthesize_tiny_llama, llama3_tokenizer),
    "qwen3-byte-level-over-config": (synthesize_tiny, byte_level_over_config),
    "qwen3-generation-config": (synthesize_tiny, generation_config),
    "qwen3-model-card": (synthesize_tiny, model_card),
}


def build(case: str, out_dir: Path) -> Path:
    """Synthesize the base model into *out_dir* and reshape it as *case* says."""
    synth, reshape = CASES[case]
    synth(out_dir)
    reshape(out_dir)
    return out_dir
