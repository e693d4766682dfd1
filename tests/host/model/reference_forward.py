"""A plain numpy forward pass of the Hugging Face Qwen3 / Llama decoder (tests only).

It reads the *source* safetensors, not the GGUF, and follows transformers' modeling
code: RMSNorm, grouped-query attention with rotate-half RoPE, per-head q/k RMSNorm
for Qwen3, SwiGLU MLP, tied or separate output head. Computed in float64 so the
reference's own rounding is far below the tolerance we hold llama.cpp to.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt

from host.model.safetensors_header import parse_header, read_f32

F64 = npt.NDArray[np.float64]


class ReferenceModel:
    """Weights and hyperparameters of a source checkpoint, for :meth:`logits`."""

    def __init__(self, source: Path) -> None:
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
        self.w = {
            name: read_f32(path, entry).astype(np.float64) for name, entry in header.tensors.items()
        }
        self.head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])

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
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, self.heads, self.head_dim)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, self.kv_heads, self.head_dim)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, self.kv_heads, self.head_dim)
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
            x = x + out.reshape(n, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            up = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
        return self._norm(x, w["model.norm.weight"]) @ self.head.T
