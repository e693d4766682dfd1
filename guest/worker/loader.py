"""Load the GGUF: digest first, then llama.cpp, with failures as closed categories.

Weights are memory-mapped (`use_mmap=True`): mapped pages are shared and reclaimable,
whereas with no swap `use_mmap=False` pins the whole model as private memory and the
cgroup's headroom shrinks by the model's size for nothing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import llama_cpp
from llama_cpp import Llama

from guest.worker.digest import verify_digest
from guest.worker.llamalog import LOG, classify_load_failure

LoadCategory = Literal[
    "model_digest_mismatch",
    "model_load_failed",
    "model_load_out_of_memory",
    "model_file_unreadable",
    "cancelled",
]


class LoadError(Exception):
    """The model did not load; `category` says why (never llama.cpp's text)."""

    def __init__(self, category: LoadCategory) -> None:
        super().__init__(category)
        self.category: LoadCategory = category


@dataclass(frozen=True)
class LoadOptions:
    n_ctx: int
    n_threads: int
    n_batch: int = 512


@dataclass
class LoadedModel:
    """A loaded model and the facts about it the rest of the worker needs."""

    llm: Llama
    sha256: str
    file_bytes: int
    n_ctx: int
    n_vocab: int
    load_ms: int
    kv_bytes_per_token: int
    chat_template: str | None
    add_bos: bool

    @property
    def vocab(self) -> llama_cpp.llama_vocab_p:
        vocab: llama_cpp.llama_vocab_p = self.llm._model.vocab
        return vocab


def kv_bytes_per_token(metadata: dict[str, str]) -> int:
    """Bytes of K and V cache one token occupies (f16 cache, every layer).

    Uses `key_length`/`value_length` when present (Qwen3's head_dim differs from
    hidden/heads) and falls back to hidden/heads as llama.cpp does.
    """
    arch = metadata.get("general.architecture", "")

    def get(key: str) -> int | None:
        value = metadata.get(f"{arch}.{key}")
        return int(value) if value is not None else None

    layers = get("block_count") or 0
    heads = get("attention.head_count") or 1
    kv_heads = get("attention.head_count_kv") or heads
    hidden = get("embedding_length") or 0
    head_dim = hidden // heads if heads else 0
    k_len = get("attention.key_length") or head_dim
    v_len = get("attention.value_length") or head_dim
    return layers * kv_heads * (k_len + v_len) * 2


def load_model(
    path: Path,
    sha256_hex: str,
    options: LoadOptions,
    should_stop: Callable[[], bool] = lambda: False,
) -> LoadedModel:
    """Verify *path* against *sha256_hex*, then load it; raise `LoadError` otherwise."""
    started = time.monotonic()
    outcome = verify_digest(path, sha256_hex, should_stop)
    if outcome == "cancelled":
        raise LoadError("cancelled")
    if outcome == "unreadable":
        raise LoadError("model_file_unreadable")
    if outcome == "mismatch":
        raise LoadError("model_digest_mismatch")
    LOG.install()
    LOG.mark()
    try:
        llm = Llama(
            model_path=str(path),
            n_ctx=options.n_ctx,
            n_batch=options.n_batch,
            n_ubatch=options.n_batch,
            n_threads=options.n_threads,
            n_threads_batch=options.n_threads,
            use_mmap=True,
            logits_all=False,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise LoadError(classify_load_failure(LOG.lines())) from exc
    metadata = dict(llm.metadata)
    add_bos = metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
    return LoadedModel(
        llm=llm,
        sha256=sha256_hex,
        file_bytes=os.stat(path).st_size,
        n_ctx=llm.n_ctx(),
        n_vocab=llm.n_vocab(),
        load_ms=int((time.monotonic() - started) * 1000),
        kv_bytes_per_token=kv_bytes_per_token(metadata),
        chat_template=metadata.get("tokenizer.chat_template"),
        add_bos=add_bos,
    )
