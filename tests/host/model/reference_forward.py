"""A plain numpy forward pass of the Hugging Face Qwen3 / Llama decoder (tests only).

It reads the *source* safetensors, not the GGUF, and follows transformers' modeling
code: RMSNorm, grouped-query attention with rotate-half RoPE, per-head q/k RMSNorm
for Qwen3, SwiGLU MLP, tied or separate output head. Computed in float64 so the
reference's own rounding is far below the tolerance we hold llama.cpp to.

``ReferenceModel(source, storage)`` models what llama.cpp's CPU backend computes on a
GGUF whose matrices are stored as *storage* (``f32``, ``f16``, ``bf16`` or ``q8_0``),
so that argmax agreement is a check of the conversion and not a coin toss on the
rounding of near-tied logits:

- each 2-D weight holds the values the GGUF stores (rounded to f16 or bf16, or
  quantized to Q8_0 and back); 1-D norm weights stay f32, and Q8_0 rows that do
  not fill 32-value blocks are f16, as in the converter and ``convert_hf_to_gguf.py``;
- before every matrix product with such a weight, the activations are converted to
  the weight type's ``vec_dot_type`` (``ggml-cpu.c``, ``type_traits_cpu``: F16 ->
  F16, BF16 -> BF16, Q8_0 -> Q8_0; ``ggml_compute_forward_mul_mat`` converts
  ``src1`` with ``from_float`` before the dot products). That activation rounding is
  what the float32 reference missed: at bf16 it is a relative error of up to 2**-9
  per activation, enough to flip near-tied argmaxes.

The token embedding is looked up from the stored (rounded) table, which ggml widens
to f32 exactly; the attention products use the f32 KV cache the tests request, so
they are not rounded. Accumulation stays float64 here (ggml accumulates in f32):
that difference is far below the rounding modelled above.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import gguf
import numpy as np
import numpy.typing as npt

from host.model.safetensors_header import parse_header, read_f32

F64 = npt.NDArray[np.float64]
Storage = Literal["f32", "f16", "bf16", "q8_0"]
Q = gguf.GGMLQuantizationType


def round_f16(x: F64) -> F64:
    """Round to IEEE half (nearest even, like ggml's F16C / scalar conversion)."""
    out: F64 = x.astype(np.float32).astype(np.float16).astype(np.float64)
    return out


def round_bf16(x: F64) -> F64:
    """Round to bfloat16 by ggml's rule: f32 bits + 0x7fff + lsb, keep the top half.

    Written out here rather than taken from ``gguf.quants`` so the reference does not
    share code with the converter for the type whose rounding it models. (No NaNs
    occur in these activations; ggml's NaN branch is not modelled.)
    """
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out: F64 = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return out


def round_q8_0(x: F64) -> F64:
    """Quantize rows to Q8_0 and back (the parity test checks gguf.quants against ggml)."""
    q = gguf.quants.quantize(x.astype(np.float32), Q.Q8_0)
    out: F64 = gguf.quants.dequantize(q, Q.Q8_0).astype(np.float64).reshape(x.shape)
    return out


def _identity(x: F64) -> F64:
    return x


ROUND: dict[Storage, Callable[[F64], F64]] = {
    "f32": _identity,
    "f16": round_f16,
    "bf16": round_bf16,
    "q8_0": round_q8_0,
}


def matrix_storage(shape: tuple[int, ...], storage: Storage) -> Storage:
    """The type a 2-D weight is stored as: Q8_0 needs rows in whole 32-value blocks."""
    if storage == "q8_0" and shape[-1] % 32 != 0:
        return "f16"
    return storage


class ReferenceModel:
    """Weights and hyperparameters of a source checkpoint, for :meth:`logits`."""

    def __init__(self, source: Path, storage: Storage = "f32") -> None:
        config = json.loads((source / "config.json").read_text())
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.kv_heads = int(config.get("num_key_value_heads", self.heads))
        self.head_dim = int(config.get("head_dim") or config["hidden_size"] // self.heads)
        self.eps = float(config["rms_norm_eps"])
        self.theta = float(config.get("rope_theta", 10000.0))
        self.qk_norm = config["model_type"] == "qwen3"
        path = source / "model.safetensors"
        header = parse_header(path)
        self.w: dict[str, F64] = {}
        # name -> rounding applied to the activations multiplied with that weight
        self.act_round: dict[str, Callable[[F64], F64]] = {}
        for name, entry in header.tensors.items():
            value = read_f32(path, entry).astype(np.float64)
            if value.ndim == 2:
                kind = matrix_storage(value.shape, storage)
                value = ROUND[kind](value)
                self.act_round[name] = ROUND[kind]
            self.w[name] = value
        self.head_name = (
            "lm_head.weight" if "lm_head.weight" in self.w else "model.embed_tokens.weight"
        )

    def _mm(self, x: F64, name: str) -> F64:
        """``x @ W.T`` as ggml's mul_mat computes it: activations in the vec_dot type."""
        out: F64 = self.act_round[name](x) @ self.w[name].T
        return out

    def _norm(self, x: F64, weight: F64) -> F64:
        variance = np.mean(x * x, axis=-1, keepdims=True)
        normed: F64 = x / np.sqrt(variance + self.eps) * weight
        return normed

    def _rope(self, x: F64, positions: npt.NDArray[np.int64]) -> F64:
        half = self.head_dim // 2
        inv_freq = self.theta ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)
        angles = positions[:, None].astype(np.float64) * inv_freq[None, :]
        cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
        sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        out: F64 = x * cos + rotated * sin
        return out

    def logits(self, tokens: list[int]) -> F64:
        """Logits for every position of *tokens* (causal), shape (len, vocab)."""
        w = self.w
        n = len(tokens)
        positions = np.arange(n, dtype=np.int64)
        x = w["model.embed_tokens.weight"][np.asarray(tokens)]
        mask = np.triu(np.full((n, n), -np.inf), k=1)
        group = self.heads // self.kv_heads
        for layer in range(self.layers):
            p = f"model.layers.{layer}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = self._mm(h, p + "self_attn.q_proj.weight").reshape(n, self.heads, self.head_dim)
            k = self._mm(h, p + "self_attn.k_proj.weight").reshape(n, self.kv_heads, self.head_dim)
            v = self._mm(h, p + "self_attn.v_proj.weight").reshape(n, self.kv_heads, self.head_dim)
            if self.qk_norm:
                q = self._norm(q, w[p + "self_attn.q_norm.weight"])
                k = self._norm(k, w[p + "self_attn.k_norm.weight"])
            q, k = self._rope(q, positions), self._rope(k, positions)
            out = np.empty((n, self.heads, self.head_dim))
            for head in range(self.heads):
                kv = head // group
                scores = q[:, head, :] @ k[:, kv, :].T / np.sqrt(self.head_dim) + mask
                scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
                out[:, head, :] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
            x = x + self._mm(out.reshape(n, -1), p + "self_attn.o_proj.weight")
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            gate = self._mm(h, p + "mlp.gate_proj.weight")
            up = self._mm(h, p + "mlp.up_proj.weight")
            x = x + self._mm(gate / (1.0 + np.exp(-gate)) * up, p + "mlp.down_proj.weight")
        return self._mm(self._norm(x, w["model.norm.weight"]), self.head_name)
