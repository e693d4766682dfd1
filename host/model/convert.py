"""Our own safetensors -> GGUF converter for ``qwen3`` and ``llama`` (numpy + ``gguf``).

Why our own: llama.cpp's ``convert_hf_to_gguf.py`` needs torch and transformers and
rejects tokenizers it has not hashed before (our synthesized one among them). This
converter follows its conventions (tensor names, which tensors stay F32, the Llama
q/k permutation, F16 fallback for rows Q8_0 cannot hold, ``gguf.quants`` for BF16 and
Q8_0) but is streaming: the header (metadata and tensor infos) is planned from the
safetensors headers alone, then tensors are read, converted and written one at a
time, large ones in row slices, so peak memory is one slice, not the model.

It writes every metadata key llama.cpp needs, including the ones whose absence does
not fail loading but silently changes behaviour (FIELD-NOTES: ``tokenizer.ggml.pre``,
``tokenizer.ggml.token_type``, ``rope.freq_base``, ``attention.key_length`` /
``value_length``). Output is staged and renamed into place (docs/engineering.md §5)
and the SHA-256 is computed over the bytes as they are written, never re-read.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import gguf
import numpy as np
import numpy.typing as npt
from gguf.gguf_writer import WriterState

from host import cancel
from host.model.categories import ConvertError, HeaderError, OutType
from host.model.diskspace import is_disk_full, require_free_space
from host.model.general import GeneralKey, model_card_keys, sampling_keys
from host.model.progress import current as current_progress
from host.model.rawcopy import (
    NAN_LIMITS,
    ReadInto,
    Scratch,
    path_reader,
    permute_qk,
    stored_chunks,
)
from host.model.safetensors_header import (
    DTYPES,
    TensorEntry,
    bf16_bits_to_f32,
    parse_header,
    parse_header_from,
    read_span,
    row_span,
    widen,
)
from host.model.sourcehash import HashedSource
from host.model.vocab import (
    SpecialIds,
    Vocab,
    chat_template,
    load_json_object,
    read_vocab,
    resolve_special,
)
from host.model.writeback import drop_written, start_writeback
from receipts.staging import TargetExists, staged_directory

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

# Bump when output bytes change for the same inputs; part of every cache key.
CONVERTER_VERSION = "harness-convert/3 gguf==0.19.0"
GGUF_NAME = "model.gguf"
# Large tensors (a 152k-token embedding is 1.5 GB as float32) are converted in row
# slices of about this many float32 bytes.
CHUNK_BYTES = 32 << 20
# Written bytes are handed to the disk (``start_writeback``) every this many bytes, so
# the fsync before the rename waits for the last stretch, not the whole file.
WRITEBACK_BYTES = 32 << 20

Q = gguf.GGMLQuantizationType
OUTTYPES: dict[str, tuple[Q, gguf.LlamaFileType]] = {
    "f32": (Q.F32, gguf.LlamaFileType.ALL_F32),
    "f16": (Q.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (Q.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}

# (model_type, architectures) -> GGUF architecture
ARCHITECTURES: dict[tuple[str, tuple[str, ...]], gguf.MODEL_ARCH] = {
    ("qwen3", ("Qwen3ForCausalLM",)): gguf.MODEL_ARCH.QWEN3,
    ("llama", ("LlamaForCausalLM",)): gguf.MODEL_ARCH.LLAMA,
}

# Hugging Face per-layer tensor suffix -> GGUF suffix, in the order we write them.
LAYER_TENSORS: dict[str, str] = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
QK_NORM = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")
IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)


@dataclass(frozen=True)
class HParams:
    """The hyperparameters the GGUF carries, read from config.json."""

    arch: gguf.MODEL_ARCH
    blocks: int
    context: int
    hidden: int
    ff: int
    heads: int
    kv_heads: int
    head_dim: int
    rms_eps: float
    rope_theta: float
    vocab_size: int
    tied: bool

    @property
    def arch_name(self) -> str:
        """The GGUF architecture string, e.g. ``qwen3``."""
        return gguf.MODEL_ARCH_NAMES[self.arch]


@dataclass(frozen=True)
class TensorPlan:
    """One output tensor: where its source is, its shape, output type and permutation."""

    name: str
    source_file: Path
    entry: TensorEntry
    shape: tuple[int, ...]
    qtype: Q
    permute_heads: int | None

    @property
    def nbytes(self) -> int:
        """Bytes of the converted tensor."""
        block, type_size = gguf.GGML_QUANT_SIZES[self.qtype]
        return math.prod(self.shape[:-1]) * (self.shape[-1] // block) * type_size


@dataclass(frozen=True)
class ConversionPlan:
    """Everything the GGUF will contain, decided before one tensor byte is read."""

    outtype: OutType
    hparams: HParams
    vocab: Vocab
    special: SpecialIds
    chat_template: str
    tensors: tuple[TensorPlan, ...]
    general: tuple[GeneralKey, ...] = ()


@dataclass(frozen=True)
class ConvertResult:
    """The converted file, its digest (of the bytes written) and the time it took."""

    path: Path
    sha256: str
    size: int
    tensor_count: int
    seconds: float


def _positive_int(config: dict[str, Any], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConvertError("unsupported_config")
    return value


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise ConvertError("unsupported_config")
    return float(value)


def rope_theta(config: dict[str, Any]) -> float:
    """RoPE base from ``rope_theta`` or ``rope_parameters``; scaled RoPE is refused.

    transformers' default base is 10000 when neither is given.
    """
    scaling = config.get("rope_scaling")
    params = config.get("rope_parameters")
    if scaling is not None:
        raise ConvertError("unsupported_config")
    if params is not None:
        if not isinstance(params, dict) or params.get("rope_type", "default") != "default":
            raise ConvertError("unsupported_config")
        if "rope_theta" in params:
            return _number(params["rope_theta"])
    return _number(config.get("rope_theta", 10000.0))


def read_hparams(config: dict[str, Any]) -> HParams:
    """Validate config.json for an architecture we convert; refuse what we do not."""
    architectures = config.get("architectures")
    key = (
        config.get("model_type"),
        tuple(architectures) if isinstance(architectures, list) else (),
    )
    arch = ARCHITECTURES.get(key)  # type: ignore[arg-type]
    if arch is None:
        raise ConvertError("unsupported_architecture")
    if (
        config.get("attention_bias", False) is not False
        or config.get("mlp_bias", False) is not False
        or config.get("hidden_act", "silu") != "silu"
        or config.get("use_sliding_window", False) is not False
        or any(kind != "full_attention" for kind in config.get("layer_types") or [])
    ):
        raise ConvertError("unsupported_config")
    hidden = _positive_int(config, "hidden_size")
    heads = _positive_int(config, "num_attention_heads")
    kv_heads = (
        _positive_int(config, "num_key_value_heads") if ("num_key_value_heads" in config) else heads
    )
    if "head_dim" in config and config["head_dim"] is not None:
        head_dim = _positive_int(config, "head_dim")
    elif hidden % heads == 0:
        head_dim = hidden // heads
    else:
        raise ConvertError("unsupported_config")
    if heads % kv_heads != 0 or head_dim % 2 != 0:
        raise ConvertError("unsupported_config")
    tied = config.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise ConvertError("unsupported_config")
    return HParams(
        arch=arch,
        blocks=_positive_int(config, "num_hidden_layers"),
        context=_positive_int(config, "max_position_embeddings"),
        hidden=hidden,
        ff=_positive_int(config, "intermediate_size"),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        rms_eps=_number(config.get("rms_norm_eps")),
        rope_theta=rope_theta(config),
        vocab_size=_positive_int(config, "vocab_size"),
        tied=tied,
    )


Sources = Mapping[Path, HashedSource]
"""Shards opened once and hashed as they are read, by the path the plan names them."""


def _parse(path: Path, sources: Sources | None = None) -> dict[str, TensorEntry]:
    """A shard's tensors in name order, as llama.cpp's ``SafetensorsLocal`` lists them.

    ``gguf-py/gguf/utility.py``, ``SafetensorsLocal.__init__`` (line 333 in the
    llama-cpp-python 0.3.36 sdist): ``dict(sorted(tensors.items(), key=lambda t:
    t[0]))``. A file whose header order differs from name order (the ``safetensors``
    writer groups tensors by dtype) is therefore written in name order, not header order.
    """
    try:
        if sources is not None and path in sources:
            hashed = sources[path]
            tensors = parse_header_from(hashed.read, hashed.size).tensors
        else:
            tensors = parse_header(path).tensors
    except HeaderError as exc:
        raise ConvertError("source_header_invalid", path.name, exc.category) from exc
    except OSError as exc:
        raise ConvertError("weights_missing", path.name) from exc
    return dict(sorted(tensors.items()))


def load_weight_index(
    source: Path, sources: Sources | None = None
) -> dict[str, tuple[Path, TensorEntry]]:
    """Tensor name -> (file, entry) for a single file or a sharded checkpoint.

    For shards, the index and the shard headers must agree exactly: a tensor in the
    index but not in its shard, or in a shard but not in the index, is refused.
    """
    index_path = source / "model.safetensors.index.json"
    if index_path.is_file():
        try:
            weight_map = load_json_object(index_path).get("weight_map")
        except (OSError, ValueError, TypeError) as exc:
            raise ConvertError("weights_index_invalid", index_path.name) from exc
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConvertError("weights_index_invalid", index_path.name)
        values = set(weight_map.values())
        if not all(
            isinstance(s, str) and "/" not in s and s.endswith(".safetensors") for s in values
        ):
            raise ConvertError("weights_index_invalid", index_path.name)
        shards = sorted(values)
        found: dict[str, tuple[Path, TensorEntry]] = {}
        for shard in shards:
            for name, entry in _parse(source / shard, sources).items():
                if weight_map.get(name) != shard or name in found:
                    raise ConvertError("weights_index_invalid", name)
                found[name] = (source / shard, entry)
        absent = sorted(set(weight_map) - set(found))
        if absent:
            raise ConvertError("weights_index_invalid", absent[0])
        return found
    single = source / "model.safetensors"
    return {name: (single, entry) for name, entry in _parse(single, sources).items()}


def expected_source_shapes(hp: HParams) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Hugging Face tensor name -> (GGUF name, HF shape)"""
    plan: dict[str, tuple[str, tuple[int, ...]]] = {
        "model.embed_tokens.weight": ("token_embd.weight", (hp.vocab_size, hp.hidden)),
    }
    q_rows, kv_rows = hp.heads * hp.head_dim, hp.kv_heads * hp.head_dim
    shapes = {
        "input_layernorm.weight": (hp.hidden,),
        "self_attn.q_proj.weight": (q_rows, hp.hidden),
        "self_attn.k_proj.weight": (kv_rows, hp.hidden),
        "self_attn.v_proj.weight": (kv_rows, hp.hidden),
        "self_attn.o_proj.weight": (hp.hidden, q_rows),
        "self_attn.q_norm.weight": (hp.head_dim,),
        "self_attn.k_norm.weight": (hp.head_dim,),
        "post_attention_layernorm.weight": (hp.hidden,),
        "mlp.gate_proj.weight": (hp.ff, hp.hidden),
        "mlp.up_proj.weight": (hp.ff, hp.hidden),
        "mlp.down_proj.weight": (hp.hidden, hp.ff),
    }
    for layer in range(hp.blocks):
        for suffix, gguf_suffix in LAYER_TENSORS.items():
            if suffix in QK_NORM and hp.arch != gguf.MODEL_ARCH.QWEN3:
                continue
            plan[f"model.layers.{layer}.{suffix}"] = (f"blk.{layer}.{gguf_suffix}", shapes[suffix])
    plan["model.norm.weight"] = ("output_norm.weight", (hp.hidden,))
    plan["lm_head.weight"] = ("output.weight", (hp.vocab_size, hp.hidden))
    return plan


def output_qtype(shape: tuple[int, ...], outtype: OutType) -> Q:
    """1-D tensors (norms) stay F32, as llama.cpp expects; rows Q8_0 cannot block
    evenly fall back to F16, as ``convert_hf_to_gguf.py`` does."""
    if len(shape) <= 1:
        return Q.F32
    qtype = OUTTYPES[outtype][0]
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    if shape[-1] % block != 0:
        return Q.F16
    return qtype


def plan_tensors(
    hp: HParams, weights: dict[str, tuple[Path, TensorEntry]], outtype: OutType
) -> tuple[TensorPlan, ...]:
    """Map, check and order every source tensor; refuse unknown or missing ones.

    Output order is source order (shards by name, then each header's order), which
    is the order ``convert_hf_to_gguf.py`` writes; so the two files list tensors alike.
    """
    expected = expected_source_shapes(hp)
    for name in weights:
        if name in expected or name.endswith(IGNORED_SUFFIXES):
            continue
        raise ConvertError("unexpected_tensor", name)
    for name in expected:
        if name == "lm_head.weight" and hp.tied:
            # Tied embeddings: the output matrix is token_embd, and a checkpoint need
            # not carry lm_head. One that does gets output.weight from it, as
            # convert_hf_to_gguf.py writes every tensor the checkpoint holds
            # (conversion/qwen.py and llama.py drop nothing for tie_word_embeddings).
            continue
        if name not in weights:
            raise ConvertError("missing_tensor", name)
    plans: list[TensorPlan] = []
    for name in (n for n in weights if n in expected):
        gguf_name, shape = expected[name]
        path, entry = weights[name]
        if entry.shape != shape or entry.dtype not in ("F32", "F16", "BF16"):
            raise ConvertError("tensor_shape_mismatch", name)
        permute: int | None = None
        if hp.arch == gguf.MODEL_ARCH.LLAMA and name.endswith("self_attn.q_proj.weight"):
            permute = hp.heads
        elif hp.arch == gguf.MODEL_ARCH.LLAMA and name.endswith("self_attn.k_proj.weight"):
            permute = hp.kv_heads
        plans.append(
            TensorPlan(gguf_name, path, entry, shape, output_qtype(shape, outtype), permute)
        )
    return tuple(plans)


def plan_conversion(
    source: Path, outtype: OutType, sources: Sources | None = None
) -> ConversionPlan:
    """Read config, tokenizer and headers; decide every byte of metadata.

    With *sources*, each shard's header is read through its hashed open file (so the
    header that decides the plan is part of the bytes compared with the pin).
    """
    if outtype not in OUTTYPES:
        raise ConvertError("unsupported_outtype")
    try:
        config = load_json_object(source / "config.json")
    except (OSError, ValueError, TypeError) as exc:
        raise ConvertError("config_unreadable", "config.json") from exc
    tokenizer: dict[str, Any] = {}
    for name in ("tokenizer.json", "tokenizer_config.json"):
        try:
            tokenizer[name] = load_json_object(source / name)
        except (OSError, ValueError, TypeError) as exc:
            raise ConvertError("tokenizer_unreadable", name) from exc
    with _about("config.json"):
        hp = read_hparams(config)
    with _about("tokenizer.json"):
        vocab = read_vocab(tokenizer["tokenizer.json"], hp.vocab_size)
    with _about("tokenizer_config.json"):
        special = resolve_special(
            vocab, tokenizer["tokenizer_config.json"], config, tokenizer["tokenizer.json"]
        )
        template = chat_template(source, tokenizer["tokenizer_config.json"])
    general = sampling_keys(source) + model_card_keys(source)
    tensors = plan_tensors(hp, load_weight_index(source, sources), outtype)
    return ConversionPlan(outtype, hp, vocab, special, template, tensors, general)


@contextmanager
def _about(name: str) -> Iterator[None]:
    """Name *name* as the subject of a refusal raised without one (for the CLI)."""
    try:
        yield
    except ConvertError as exc:
        if exc.subject is not None:
            raise
        raise ConvertError(exc.category, name, exc.cause) from exc


def planned_size(plan: ConversionPlan, alignment: int = gguf.GGUF_DEFAULT_ALIGNMENT) -> int:
    """An upper bound of the GGUF's size in bytes, from the plan alone.

    Tensor data is exact (plus at most one alignment per tensor); the header is bounded
    by the strings and arrays it holds plus a fixed allowance per key and per tensor.
    Used to refuse a conversion that cannot fit before it starts.
    """
    strings = [*plan.vocab.tokens, *plan.vocab.merges, plan.chat_template]
    header = sum(len(text.encode("utf-8")) + 8 for text in strings)
    header += 4 * len(plan.vocab.token_types) + (1 << 16)
    infos = sum(len(t.name) + 8 + 8 * len(t.shape) + 16 for t in plan.tensors)
    data = sum(t.nbytes + alignment for t in plan.tensors)
    return header + infos + data + alignment


def _astype(dtype: str) -> Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]]:
    return lambda values: np.ascontiguousarray(values, dtype=dtype)


def _quantize(qtype: Q) -> Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]]:
    return lambda values: np.ascontiguousarray(gguf.quants.quantize(values, qtype))


# numpy's casts round to nearest even, like ggml's F16 conversion; BF16 and Q8_0 use
# gguf.quants, which the parity tests show byte-exact with ggml_quantize_chunk.
ENCODERS: dict[Q, Callable[[npt.NDArray[np.float32]], npt.NDArray[Any]]] = {
    Q.F32: _astype("<f4"),
    Q.F16: _astype("<f2"),
    Q.BF16: _quantize(Q.BF16),
    Q.Q8_0: _quantize(Q.Q8_0),
}


def encode(values: npt.NDArray[np.float32], qtype: Q) -> npt.NDArray[np.uint8]:
    """Convert float32 values to the stored bytes of *qtype* (little-endian)."""
    return ENCODERS[qtype](values).reshape(-1).view(np.uint8)


ADD_VALUE: dict[str, Callable[[gguf.GGUFWriter, str, Any], None]] = {
    "int32": gguf.GGUFWriter.add_int32,
    "float32": gguf.GGUFWriter.add_float32,
    "string": gguf.GGUFWriter.add_string,
    "strings": lambda writer, key, values: writer.add_array(key, list(values)),
}


def add_metadata(writer: gguf.GGUFWriter, plan: ConversionPlan) -> None:
    """Every key llama.cpp reads for these architectures, in a fixed order."""
    hp, vocab, special = plan.hparams, plan.vocab, plan.special
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_block_count(hp.blocks)
    writer.add_context_length(hp.context)
    writer.add_embedding_length(hp.hidden)
    writer.add_feed_forward_length(hp.ff)
    writer.add_head_count(hp.heads)
    writer.add_head_count_kv(hp.kv_heads)
    writer.add_rope_freq_base(hp.rope_theta)
    writer.add_layer_norm_rms_eps(hp.rms_eps)
    writer.add_key_length(hp.head_dim)
    writer.add_value_length(hp.head_dim)
    writer.add_file_type(OUTTYPES[plan.outtype][1])
    for key in plan.general:
        ADD_VALUE[key.kind](writer, key.key, key.value)
    if hp.arch == gguf.MODEL_ARCH.LLAMA:
        writer.add_vocab_size(hp.vocab_size)
        writer.add_rope_dimension_count(hp.head_dim)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.token_types)
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(special.bos)
    writer.add_eos_token_id(special.eos)
    if special.pad is not None:
        writer.add_pad_token_id(special.pad)
    writer.add_add_bos_token(special.add_bos)
    writer.add_add_eos_token(special.add_eos)
    if special.add_sep is not None:
        writer.add_add_sep_token(special.add_sep)
    if hp.arch == gguf.MODEL_ARCH.LLAMA and special.add_space_prefix is not None:
        # convert_hf_to_gguf.py's LlamaModel.set_vocab writes it when declared;
        # llama.cpp prepends a space to BPE input when it is true.
        writer.add_add_space_prefix(special.add_space_prefix)
    writer.add_chat_template(plan.chat_template)


class HashingFile(io.BufferedWriter):
    """A buffered file that hashes and counts every byte written through it.

    Every hash update runs on one hashing thread, in write order (a FIFO executor),
    while the calling thread goes on writing and reading: hashlib and the write
    syscall both release the GIL, so hashing overlaps the I/O. ``write`` returns
    once its bytes are hashed and written (the caller may reuse the buffer);
    ``write_nowait`` returns once they are written, with a future that is done when
    they are hashed: the caller must not change the buffer before that.
    :meth:`hexdigest` waits for every pending update.

    With *writeback_bytes*, every that many bytes written are flushed and handed to
    the disk (:func:`~host.model.writeback.start_writeback`) so the caller's final
    ``fsync`` has less to wait for; the ``fsync`` is still the caller's to make.
    """

    def __init__(self, raw: io.FileIO, writeback_bytes: int = 0) -> None:
        super().__init__(raw)
        self._digest = hashlib.sha256()
        self.count = 0
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gguf-hash")
        # 0: never start writeback early; else every this many bytes (WRITEBACK_BYTES)
        self._writeback_bytes = writeback_bytes
        self.writeback_from = 0  # bytes before this offset have been handed to the disk
        self.dropped_from = 0  # bytes before this offset are written and out of the cache

    def write_nowait(self, buffer: ReadableBuffer, /) -> Future[None]:
        """Count and write *buffer* now; hash it on the hashing thread."""
        cancel.check()  # every write of the GGUF passes here: a cancelled trial stops
        view = memoryview(buffer).cast("B")
        self.count += len(view)
        hashed = self._hasher.submit(self._digest.update, view)
        super().write(view)
        if self._writeback_bytes and self.count - self.writeback_from >= self._writeback_bytes:
            self.flush()  # the range must be in the page cache, not in our buffer
            start_writeback(self.fileno(), self.writeback_from, self.count - self.writeback_from)
            # the range handed to the disk one step earlier: written by now (or soon),
            # and never read again here, so out of the page cache (writeback.py)
            drop_written(self.fileno(), self.dropped_from, self.writeback_from - self.dropped_from)
            self.dropped_from = self.writeback_from
            self.writeback_from = self.count
        return hashed

    def write(self, buffer: ReadableBuffer, /) -> int:
        """Hash, count and write *buffer*; return when both are done."""
        hashed = self.write_nowait(buffer)
        hashed.result()
        return memoryview(buffer).nbytes

    def hexdigest(self) -> str:
        """SHA-256 of everything written, once the hashing thread has caught up."""
        self._hasher.submit(_nothing).result()
        return self._digest.hexdigest()

    def close(self) -> None:
        """Close the file and stop the hashing thread."""
        try:
            super().close()
        finally:
            self._hasher.shutdown(wait=True)


def _nothing() -> None:
    """A marker task: when it has run, every earlier hash update has too."""


class _StreamingWriter(gguf.GGUFWriter):
    """GGUFWriter that writes its header through our hashing file.

    We use it for metadata and tensor infos only; tensor data is written by
    :func:`write_gguf`, one tensor at a time, after the header.
    """

    def __init__(self, sink: HashingFile, arch: str) -> None:
        super().__init__(None, arch)
        self._sink = sink

    def open_output_file(self, path: Path | None = None) -> None:
        """Attach the sink instead of opening a file by name."""
        self.fout = [self._sink]
        self.state = WriterState.EMPTY


def _pad(sink: HashingFile, alignment: int) -> None:
    sink.write_nowait(b"\0" * (-sink.count % alignment))  # a fresh object: no reuse


SpanRead = Callable[[Path, int, int], bytes]
"""``read(file, offset, nbytes)``: exactly that span of a source file."""


class WriteCheck(Protocol):
    """What is told about every tensor as it is written (host/model/verify_gguf.py's
    :class:`~host.model.verify_gguf.InWriteCheck` compares it with its own expectation)."""

    def begin(self, tensor: TensorPlan, offset: int) -> None:
        """*tensor*'s data starts at file *offset* of the GGUF."""

    def chunk(self, source_offset: int, source: ReadableBuffer, written: ReadableBuffer) -> None:
        """*written* was made from the stored *source* bytes at *source_offset*."""

    def end(self, offset: int) -> None:
        """The current tensor's data ended at file *offset*."""


def row_slices(
    tensor: TensorPlan, chunk_bytes: int, read: SpanRead = read_span
) -> Iterator[tuple[int, bytes, npt.NDArray[np.float32]]]:
    """(source offset, stored bytes, float32 values permuted if needed) in whole rows.

    Every output encoding is row-wise (Q8_0 blocks never cross a row), so encoding
    the slices one after another gives the same bytes as encoding the whole tensor.
    Permuted q/k tensors are read whole: the permutation moves rows within a head.
    """
    entry = tensor.entry
    dtype = np.dtype(DTYPES[entry.dtype][1])
    if tensor.permute_heads is not None or len(tensor.shape) == 1:
        data = read(tensor.source_file, entry.begin, entry.nbytes)
        values = widen(np.frombuffer(data, dtype=dtype).reshape(entry.shape), entry.dtype)
        if tensor.permute_heads is not None:
            values = permute_qk(values, tensor.permute_heads)
        yield entry.begin, data, values
        return
    rows = tensor.shape[0]
    row_bytes = math.prod(tensor.shape[1:]) * 4
    step = max(1, chunk_bytes // row_bytes)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        offset, nbytes = row_span(entry, start, stop)
        data = read(tensor.source_file, offset, nbytes)
        raw = np.frombuffer(data, dtype=dtype).reshape(stop - start, *tensor.shape[1:])
        yield offset, data, widen(raw, entry.dtype)


def _is_passthrough(tensor: TensorPlan) -> bool:
    """Stored bytes can be copied: the source type is the output type."""
    return tensor.entry.dtype == _STORED_NAME.get(tensor.qtype)


_STORED_NAME = {Q.F32: "F32", Q.F16: "F16", Q.BF16: "BF16"}


def _write_encoded(
    sink: HashingFile, tensor: TensorPlan, chunk_bytes: int, read: SpanRead, check: WriteCheck
) -> int:
    written = 0
    for offset, raw, values in row_slices(tensor, chunk_bytes, read):
        data = encode(values, tensor.qtype)
        check.chunk(offset, raw, data.data)
        sink.write(data.data)
        written += data.nbytes
        del values, data
    return written


def _write_stored(
    sink: HashingFile, tensor: TensorPlan, scratch: Scratch, read_into: ReadInto, check: WriteCheck
) -> int:
    """Copy stored bytes; a 16-bit chunk holding a NaN goes through :func:`encode`."""
    limits = NAN_LIMITS[tensor.entry.dtype]
    row_shape = tensor.shape[1:]
    written = 0
    for chunk in stored_chunks(read_into, tensor.entry, scratch, tensor.permute_heads):
        if limits is not None:
            bits = np.frombuffer(chunk.data, dtype="<u2")
            if scratch.has_nan(bits, *limits):
                if tensor.entry.dtype == "BF16":
                    values = bf16_bits_to_f32(bits)
                else:
                    values = bits.view("<f2").astype(np.float32)
                values = values.reshape(-1, *row_shape)
                data = encode(values, tensor.qtype)
                check.chunk(chunk.offset, chunk.source, data.data)
                scratch.hold(sink.write_nowait(data.data))
                written += data.nbytes
                continue
        check.chunk(chunk.offset, chunk.source, chunk.data)
        scratch.hold(sink.write_nowait(chunk.data))
        written += len(chunk.data)
    return written


class _NoCheck:
    """No check while writing (``harness model verify`` reads the file back instead)."""

    def begin(self, tensor: TensorPlan, offset: int) -> None:
        """Nothing to note."""

    def chunk(self, source_offset: int, source: ReadableBuffer, written: ReadableBuffer) -> None:
        """Nothing to compare."""

    def end(self, offset: int) -> None:
        """Nothing to close."""


def write_gguf(
    plan: ConversionPlan,
    out_file: Path,
    progress: Callable[[str], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    *,
    sources: Mapping[Path, HashedSource] | None = None,
    check: WriteCheck | None = None,
) -> tuple[str, int]:
    """Write the GGUF to *out_file*; return (SHA-256, size) of the bytes written.

    With *sources*, every source byte is read through its shard's
    :class:`~host.model.sourcehash.HashedSource` (the plan must have been made with the
    same *sources*), so the shards are hashed by this one pass. *check* is shown every
    tensor's offset and every chunk's source and written bytes as they are written.
    *progress* is called with each tensor's name after it is written (a CLI shows a
    progress bar with it); an exception raised there aborts the write like any other.
    """
    checker: WriteCheck = _NoCheck() if check is None else check
    with HashingFile(io.FileIO(out_file, "xb"), WRITEBACK_BYTES) as sink:
        writer = _StreamingWriter(sink, plan.hparams.arch_name)
        add_metadata(writer, plan)
        for tensor in plan.tensors:
            writer.add_tensor_info(
                tensor.name, tensor.shape, np.dtype(np.float32), tensor.nbytes, tensor.qtype
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        alignment = writer.data_alignment
        stored = [t.nbytes for t in plan.tensors if _is_passthrough(t)]
        scratch = Scratch(min(chunk_bytes, max(stored, default=0)))
        bar = current_progress()
        bar.begin(f"convert {plan.outtype}", sum(t.nbytes for t in plan.tensors))
        try:
            with ExitStack() as readers:
                for tensor in plan.tensors:
                    _pad(sink, alignment)
                    checker.begin(tensor, sink.count)
                    hashed = None if sources is None else sources[tensor.source_file]
                    if _is_passthrough(tensor):
                        read_into: ReadInto = (
                            readers.enter_context(path_reader(tensor.source_file))
                            if hashed is None
                            else hashed.read_into
                        )
                        written = _write_stored(sink, tensor, scratch, read_into, checker)
                    else:
                        read: SpanRead = read_span if hashed is None else _hashed_span(hashed)
                        written = _write_encoded(sink, tensor, chunk_bytes, read, checker)
                    if written != tensor.nbytes:
                        raise RuntimeError("encoded size differs from the planned size")
                    checker.end(sink.count)
                    bar.advance(written)
                    if progress is not None:
                        progress(tensor.name)
        finally:
            bar.end()
        _pad(sink, alignment)
        sink.flush()
        digest = sink.hexdigest()
        os.fsync(sink.fileno())
        return digest, sink.count


def _hashed_span(source: HashedSource) -> SpanRead:
    def read(path: Path, offset: int, nbytes: int) -> bytes:
        data = source.read(offset, nbytes)
        if len(data) != nbytes:
            raise HeaderError("offsets_out_of_range")
        return data

    return read


def convert(
    source: Path,
    target_dir: Path,
    outtype: OutType,
    *,
    progress: Callable[[str], None] | None = None,
) -> ConvertResult:
    """Convert *source* into ``target_dir/model.gguf``, staged then renamed.

    A non-empty *target_dir* is refused; a stale staging directory is removed; any
    exception (KeyboardInterrupt included) removes the partial output.
    """
    started = time.perf_counter()
    plan = plan_conversion(source, outtype)
    target_dir.parent.mkdir(parents=True, exist_ok=True)
    require_free_space(target_dir.parent, planned_size(plan))
    try:
        with staged_directory(target_dir) as stage:
            digest, size = write_gguf(plan, stage / GGUF_NAME, progress)
    except TargetExists as exc:
        raise ConvertError("target_not_empty") from exc
    except OSError as exc:
        if is_disk_full(exc):
            raise ConvertError("disk_full") from exc
        raise
    elapsed = time.perf_counter() - started
    return ConvertResult(target_dir / GGUF_NAME, digest, size, len(plan.tensors), elapsed)
