"""Synthesize tiny random-weight checkpoints that are byte-identical on every machine.

Why: the ``tiny`` profile must exercise every stage (pins, conversion, verification,
cache, worker) in seconds, without downloading weights, and its pins in the profile
must equal what any machine writes. So every byte here is a function of constants:
weights come from raw PCG64 output (the bit generator's algorithm is fixed, unlike
numpy's distribution methods) turned into numbers by our own arithmetic, the BPE
vocabulary is trained by ``tokenizers`` on an embedded corpus with a single
deterministic trainer, and every JSON file is written with fixed key order.

The Qwen3 model deliberately has ``head_dim`` (32) different from
``hidden_size / num_attention_heads`` (16), as real Qwen3 does, so a converter that
forgets ``attention.key_length``/``value_length`` breaks visibly.

Usage: ``python -m host.model.synth OUT_DIR [--llama]`` prints the pin table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

from host.model.pins import Pin, format_pins_toml, pins_of
from host.model.vocab import QWEN2_PRETOKENIZER_REGEX

SEED = 20261129
VOCAB_SIZE = 1024
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TOOL_TOKENS = ("<tool_call>", "</tool_call>")

# Qwen2.5/Qwen3-style ChatML template with tool support, trimmed to what our worker
# renders: system prompt, tool signatures in <tools>, <tool_call> JSON, tool results.
CHAT_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    '    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.'
    "\\n\\nYou are provided with function signatures within <tools></tools> XML tags:"
    '\\n<tools>" }}\n'
    "    {%- for tool in tools %}\n"
    '        {{- "\\n" }}\n'
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function '
    "name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>'
    '<|im_end|>\\n" }}\n'
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {{- '<|im_start|>assistant' }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if tool_call.function is defined %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    '                {{- \'\\n<tool_call>\\n{"name": "\' + tool_call.name + '
    '\'", "arguments": \' }}\n'
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'tool' %}\n"
    "        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}\n"
    "        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

# A fixed training corpus: prose, Python, shell, JSON and a little non-Latin text, so
# the vocabulary has merges for the kind of text the agent sees. Never edit it without
# updating the tiny profile's pins.
CORPUS = r'''
A sandboxed evaluation harness runs one trial end to end and leaves one receipt that a
reviewer can audit without trusting us. Every stage appends closed records to a ledger.
A stage that fails ends the trial with the category that names the failure; teardown and
bundling still run. The verdict is computed from the records, never set by hand.
The agent reads files, edits them, writes new ones, lists directories, searches with
grep, runs the tests and finishes. The model answers with a tool call in JSON.
Fail closed: missing, malformed, duplicate, truncated or unknown evidence never produces
success. A probe answers present, absent or unread. Budgets are hard. Account exactly.
Stage, then rename. Identity is a content key; provenance is a separate field.

def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number."""
    if n < 2:
        return n
    previous, current = 0, 1
    for _ in range(n - 1):
        previous, current = current, previous + current
    return current


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def increment(self, step: int = 1) -> int:
        self.count += step
        return self.count


import os
import sys
from pathlib import Path

def read_config(path: Path) -> dict[str, str]:
    with open(path, encoding="utf-8") as handle:
        return dict(line.strip().split("=", 1) for line in handle if "=" in line)

for index, value in enumerate([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]):
    print(f"{index}: {value}")

try:
    result = compute(values)
except ValueError as error:
    raise RuntimeError("could not compute") from error
finally:
    cleanup()

$ python -m pytest tests/ -q
$ git diff --stat && git status
$ ls -la /tmp && cat README.md | head -n 20

{"name": "read", "arguments": {"filePath": "src/app.py", "offset": 0, "limit": 200}}
{"name": "edit", "arguments": {"filePath": "src/app.py",
  "oldString": "return a - b", "newString": "return a + b"}}
{"name": "run_tests", "arguments": {}}
{"name": "finish", "arguments": {"summary": "Fixed the off-by-one error in the loop."}}

The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 3.14159 2.71828 -1 +7 1e-6 0x1F.
Punctuation: (a, b) [c; d] {e: f} <g> "h" 'i' `j` ~k !l ?m @n #o $p %q ^r &s *t _u =v |w \x /y.
Unicode: café naïve façade Straße ÆØÅ Ελληνικά кириллица
日本語のテキスト 中文文本 한국어 🙂 ✓ → ∑ ≤ ≥ ±.
I've been told he's there; we're sure they'll come, I'd say you'd like it, isn't it?
Tests passed: 12, failed: 0, skipped: 0. Exit status 0. Error: file not found.
Traceback (most recent call last):
  File "main.py", line 3, in <module>
AssertionError: expected 4, got 5
'''


@dataclass(frozen=True)
class TinySpec:
    """Architecture of one synthesized checkpoint."""

    model_type: str
    architecture: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float
    tied: bool
    qk_norm: bool
    write_head_dim: bool


QWEN3_TINY = TinySpec("qwen3", "Qwen3ForCausalLM", 64, 2, 4, 2, 32, 128, 1e6, True, True, True)
LLAMA_TINY = TinySpec(
    "llama", "LlamaForCausalLM", 64, 2, 4, 2, 16, 128, 10000.0, False, False, False
)


def build_tokenizer() -> Tokenizer:
    """Train the byte-level BPE deterministically and add Qwen's special tokens."""
    model = BPE(unk_token=None, byte_fallback=False)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = None
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZER_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    n_added = len(SPECIAL_TOKENS) + len(TOOL_TOKENS)
    trainer = BpeTrainer(
        vocab_size=VOCAB_SIZE - n_added,
        min_frequency=0,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train_from_iterator(CORPUS.splitlines(keepends=True), trainer=trainer)
    if tokenizer.get_vocab_size() != VOCAB_SIZE - n_added:
        raise RuntimeError("corpus too small for the requested vocabulary")
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    )
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        raise RuntimeError("special tokens did not take the last ids")
    return tokenizer


def _added_tokens_decoder(tokenizer: Tokenizer) -> dict[str, Any]:
    decoder: dict[str, Any] = {}
    for text in SPECIAL_TOKENS + TOOL_TOKENS:
        decoder[str(tokenizer.token_to_id(text))] = {
            "content": text,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": text in SPECIAL_TOKENS,
        }
    return decoder


def tokenizer_config(tokenizer: Tokenizer) -> dict[str, Any]:
    """Qwen-style tokenizer_config.json: no BOS prepended, ``<|im_end|>`` ends a turn."""
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": _added_tokens_decoder(tokenizer),
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def model_config(spec: TinySpec, tokenizer: Tokenizer) -> dict[str, Any]:
    """config.json in the field names transformers writes for the architecture."""
    config: dict[str, Any] = {
        "architectures": [spec.architecture],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": tokenizer.token_to_id("<|endoftext|>"),
        "eos_token_id": tokenizer.token_to_id("<|im_end|>"),
        "hidden_act": "silu",
        "hidden_size": spec.hidden,
        "initializer_range": 0.02,
        "intermediate_size": spec.intermediate,
        "max_position_embeddings": 4096,
        "model_type": spec.model_type,
        "num_attention_heads": spec.heads,
        "num_hidden_layers": spec.layers,
        "num_key_value_heads": spec.kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": spec.rope_theta,
        "tie_word_embeddings": spec.tied,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": VOCAB_SIZE,
    }
    if spec.write_head_dim:
        config["head_dim"] = spec.head_dim
    return dict(sorted(config.items()))


def tensor_shapes(spec: TinySpec) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor names and shapes ([out, in] for linear weights)."""
    h, hd, ff = spec.hidden, spec.head_dim, spec.intermediate
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (VOCAB_SIZE, h),
        "model.norm.weight": (h,),
    }
    if not spec.tied:
        shapes["lm_head.weight"] = (VOCAB_SIZE, h)
    for layer in range(spec.layers):
        p = f"model.layers.{layer}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "self_attn.q_proj.weight"] = (spec.heads * hd, h)
        shapes[p + "self_attn.k_proj.weight"] = (spec.kv_heads * hd, h)
        shapes[p + "self_attn.v_proj.weight"] = (spec.kv_heads * hd, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, spec.heads * hd)
        shapes[p + "mlp.gate_proj.weight"] = (ff, h)
        shapes[p + "mlp.up_proj.weight"] = (ff, h)
        shapes[p + "mlp.down_proj.weight"] = (h, ff)
        if spec.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = (hd,)
            shapes[p + "self_attn.k_norm.weight"] = (hd,)
    return dict(sorted(shapes.items()))


def f32_to_bf16_bits(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """Round float32 to BF16 bit patterns, nearest-even (inputs here are finite)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return rounded.astype(np.uint16)


def _uniform(bitgen: np.random.PCG64, count: int, half_width: float) -> npt.NDArray[np.float32]:
    """Uniform in [-w, w) from raw 64-bit PCG64 words: 53 high bits -> [0, 1)."""
    raw = np.asarray(bitgen.random_raw(count), dtype=np.uint64)
    unit = (raw >> np.uint64(11)).astype(np.float64) * (2.0**-53)
    return ((unit * 2.0 - 1.0) * half_width).astype(np.float32)


def random_weights(spec: TinySpec, seed: int = SEED) -> dict[str, npt.NDArray[np.uint16]]:
    """BF16 weights, drawn in sorted-name order from one PCG64 stream.

    Linear weights have standard deviation 1/sqrt(fan_in), embeddings 1, and norm
    weights are 1 +/- 0.2 so that a converter that drops or misplaces a norm changes
    the logits.
    """
    bitgen = np.random.PCG64(seed)
    weights: dict[str, npt.NDArray[np.uint16]] = {}
    for name, shape in tensor_shapes(spec).items():
        count = math.prod(shape)
        if len(shape) == 1:
            values = 1.0 + _uniform(bitgen, count, 0.2)
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            values = _uniform(bitgen, count, math.sqrt(3.0))
        else:
            values = _uniform(bitgen, count, math.sqrt(3.0 / shape[1]))
        weights[name] = f32_to_bf16_bits(values.astype(np.float32)).reshape(shape)
    return weights


def safetensors_bytes(
    tensors: dict[str, tuple[str, npt.NDArray[Any]]], order: Sequence[str] | None = None
) -> bytes:
    """Serialize ``name -> (dtype, array)`` as safetensors, deterministically.

    Tensors are laid out in sorted-name order; the JSON header is compact with sorted
    keys and padded with spaces to a multiple of 8 bytes, as the reference writer does.
    With *order* (every name once), header and data follow it instead: the
    ``safetensors`` library groups tensors by dtype, so real files are not always in
    name order, and converters must not depend on it.
    """
    names = sorted(tensors) if order is None else list(order)
    if sorted(names) != sorted(tensors):
        raise ValueError("order must name every tensor once")
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    chunks: list[bytes] = []
    offset = 0
    for name in names:
        dtype, array = tensors[name]
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, sort_keys=order is None, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(chunks)


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)


def synthesize(out_dir: Path, spec: TinySpec, seed: int = SEED) -> list[Pin]:
    """Write config, weights, tokenizer and tokenizer_config into *out_dir*.

    The directory must be empty or absent. Returns the pin table of what was written.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise FileExistsError("output directory is not empty")
    tokenizer = build_tokenizer()
    weights = random_weights(spec, seed)
    _write(out_dir / "config.json", _json_bytes(model_config(spec, tokenizer)))
    _write(out_dir / "tokenizer.json", tokenizer.to_str().encode("utf-8"))
    _write(out_dir / "tokenizer_config.json", _json_bytes(tokenizer_config(tokenizer)))
    tensors = {name: ("BF16", bits) for name, bits in weights.items()}
    _write(out_dir / "model.safetensors", safetensors_bytes(tensors))
    return pins_of(out_dir)


def synthesize_tiny(out_dir: Path) -> list[Pin]:
    """The ``tiny`` profile's Qwen3 checkpoint (tied embeddings, head_dim 32)."""
    return synthesize(out_dir, QWEN3_TINY)


def synthesize_tiny_llama(out_dir: Path) -> list[Pin]:
    """A Llama checkpoint of the same size (untied, head_dim = hidden/heads), for tests."""
    return synthesize(out_dir, LLAMA_TINY)


def main(argv: list[str] | None = None) -> int:
    """Write a tiny checkpoint and print its pin table as TOML for a profile."""
    parser = argparse.ArgumentParser(prog="python -m host.model.synth")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--llama", action="store_true", help="the Llama test checkpoint")
    args = parser.parse_args(argv)
    pins = synthesize_tiny_llama(args.out_dir) if args.llama else synthesize_tiny(args.out_dir)
    sys.stdout.write(format_pins_toml(pins))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
