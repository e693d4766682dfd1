"""Verify a GGUF against its source checkpoint before anything trusts it.

Why: a GGUF that loads is not a GGUF that is right. llama.cpp accepts files with
missing keys it has defaults for (RoPE base 10000, a different pre-tokenizer,
``head_dim = hidden / heads``) and produces plausible garbage. So we read the file
back with ``gguf.GGUFReader`` (an implementation independent of the writer path we
use) and check, each with a closed category:

- the metadata key set is exactly what the source implies, with the right value
  types and values; the hyperparameters are re-derived here from ``config.json``
  with their own table, not taken from the converter;
- the tensor inventory is complete: names, count, shapes and storage types;
- every tensor's bytes equal the source tensor after the declared conversion, which
  is recomputed here: the Llama q/k row permutation by explicit row indices and the
  encoding by ``gguf.quants.quantize``;
- and only then the file's SHA-256, compared with the digest the converter recorded.

The token list, merges and special ids are compared with what ``host.model.vocab``
reads from ``tokenizer.json`` (shared with the converter; the llama.cpp tokenization
parity test is what checks that reading).
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt

from host.model.categories import ConvertError, HeaderError, OutType, VerifyError
from host.model.convert import CHUNK_BYTES, ConversionPlan, TensorPlan, plan_conversion
from host.model.pins import sha256_file
from host.model.safetensors_header import read_f32, read_f32_rows
from host.model.vocab import load_json_object

V = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType

# Written independently of convert.OUTTYPES on purpose (llama_ftype in llama.h).
FILE_TYPE = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}
STORAGE = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0}

Expected = dict[str, tuple[list[V], Any]]


@dataclass(frozen=True)
class VerifyReport:
    """A verified GGUF: its digest, size and what was checked."""

    sha256: str
    size: int
    metadata_keys: int
    tensor_count: int


def _config_hparams(config: dict[str, Any], arch: str) -> Expected:
    """Hyperparameter keys re-derived from config.json (defaults as in transformers)."""
    try:
        heads = int(config["num_attention_heads"])
        head_dim = config.get("head_dim") or int(config["hidden_size"]) // heads
        params = config.get("rope_parameters") or {}
        theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
        u32 = [V.UINT32]
        f32 = [V.FLOAT32]
        values: Expected = {
            f"{arch}.block_count": (u32, int(config["num_hidden_layers"])),
            f"{arch}.context_length": (u32, int(config["max_position_embeddings"])),
            f"{arch}.embedding_length": (u32, int(config["hidden_size"])),
            f"{arch}.feed_forward_length": (u32, int(config["intermediate_size"])),
            f"{arch}.attention.head_count": (u32, heads),
            f"{arch}.attention.head_count_kv": (u32, int(config.get("num_key_value_heads", heads))),
            f"{arch}.rope.freq_base": (f32, np.float32(theta)),
            f"{arch}.attention.layer_norm_rms_epsilon": (f32, np.float32(config["rms_norm_eps"])),
            f"{arch}.attention.key_length": (u32, int(head_dim)),
            f"{arch}.attention.value_length": (u32, int(head_dim)),
        }
        if arch == "llama":
            values[f"{arch}.vocab_size"] = (u32, int(config["vocab_size"]))
            values[f"{arch}.rope.dimension_count"] = (u32, int(head_dim))
    except (KeyError, TypeError, ValueError) as exc:
        raise VerifyError("source_unreadable") from exc
    return values


def expected_metadata(config: dict[str, Any], plan: ConversionPlan) -> Expected:
    """The exact key set of the GGUF, with value types and values."""
    arch = plan.hparams.arch_name
    special = plan.special
    u32, string = [V.UINT32], [V.STRING]
    expected: Expected = {
        "general.architecture": (string, arch),
        "general.type": (string, "model"),
        "general.file_type": (u32, FILE_TYPE[plan.outtype]),
        "general.quantization_version": (u32, 2),
        "tokenizer.ggml.model": (string, "gpt2"),
        "tokenizer.ggml.pre": (string, plan.vocab.pre),
        "tokenizer.ggml.tokens": ([V.ARRAY, V.STRING], plan.vocab.tokens),
        "tokenizer.ggml.token_type": ([V.ARRAY, V.INT32], plan.vocab.token_types),
        "tokenizer.ggml.merges": ([V.ARRAY, V.STRING], plan.vocab.merges),
        "tokenizer.ggml.bos_token_id": (u32, special.bos),
        "tokenizer.ggml.eos_token_id": (u32, special.eos),
        "tokenizer.ggml.add_bos_token": ([V.BOOL], special.add_bos),
        "tokenizer.ggml.add_eos_token": ([V.BOOL], special.add_eos),
        "tokenizer.chat_template": (string, plan.chat_template),
    }
    if special.pad is not None:
        expected["tokenizer.ggml.padding_token_id"] = (u32, special.pad)
    if arch == "llama" and special.add_space_prefix is not None:
        expected["tokenizer.ggml.add_space_prefix"] = ([V.BOOL], special.add_space_prefix)
    expected.update(_config_hparams(config, arch))
    return expected


def _field_value(field: gguf.ReaderField) -> Any:
    value = field.contents()
    if field.types == [V.FLOAT32]:
        return np.float32(value)
    return value


def check_metadata(reader: gguf.GGUFReader, expected: Expected) -> None:
    """Exact key set; each key's value type and value as expected."""
    present = {name: field for name, field in reader.fields.items() if not name.startswith("GGUF.")}
    for key in expected:
        if key not in present:
            raise VerifyError("metadata_missing")
    for key, field in present.items():
        if key not in expected:
            raise VerifyError("metadata_unexpected")
        types, value = expected[key]
        if field.types != types or _field_value(field) != value:
            raise VerifyError("metadata_mismatch")


def storage_type(shape: tuple[int, ...], outtype: OutType) -> Q:
    """Expected storage: 1-D in F32; Q8_0 rows that do not fill 32-blocks in F16."""
    if len(shape) == 1:
        return Q.F32
    if outtype == "q8_0" and shape[-1] % 32 != 0:
        return Q.F16
    return STORAGE[outtype]


def permutation_rows(rows: int, n_head: int) -> npt.NDArray[np.intp]:
    """Source row for each output row of llama.cpp's Llama q/k permutation.

    Within each head of ``d`` rows, output row ``2*i + j`` takes source row
    ``j*d/2 + i``: the two rotate-half halves are interleaved pairwise.
    """
    d = rows // n_head
    index = np.empty(rows, dtype=np.intp)
    for head in range(n_head):
        for i in range(d // 2):
            for j in range(2):
                index[head * d + 2 * i + j] = head * d + j * (d // 2) + i
    return index


def _source_slices(
    plan: ConversionPlan, tensor: TensorPlan, chunk_bytes: int
) -> Iterator[npt.NDArray[np.float32]]:
    """Source values in whole-row slices, q/k rows permuted (those are read whole)."""
    hp = plan.hparams
    heads = None
    if hp.arch == gguf.MODEL_ARCH.LLAMA and tensor.name.endswith(".attn_q.weight"):
        heads = hp.heads
    elif hp.arch == gguf.MODEL_ARCH.LLAMA and tensor.name.endswith(".attn_k.weight"):
        heads = hp.kv_heads
    try:
        if heads is not None or len(tensor.shape) == 1:
            values = read_f32(tensor.source_file, tensor.entry)
            if heads is not None:
                values = values[permutation_rows(values.shape[0], heads)]
            yield values
            return
        rows = tensor.shape[0]
        step = max(1, chunk_bytes // (math.prod(tensor.shape[1:]) * 4))
        for start in range(0, rows, step):
            stop = min(rows, start + step)
            yield read_f32_rows(tensor.source_file, tensor.entry, start, stop)
    except (OSError, HeaderError) as exc:
        raise VerifyError("source_unreadable") from exc


def _tensor_matches(
    read: Callable[[int, int], npt.NDArray[np.uint8]],
    stored: gguf.ReaderTensor,
    plan: ConversionPlan,
    tensor: TensorPlan,
    chunk_bytes: int,
) -> bool:
    """Encode the source slice by slice with gguf.quants; compare with the stored bytes."""
    qtype = storage_type(tensor.shape, plan.outtype)
    position = stored.data_offset
    for values in _source_slices(plan, tensor, chunk_bytes):
        expected = np.ascontiguousarray(gguf.quants.quantize(values, qtype))
        expected_bytes = expected.reshape(-1).view(np.uint8)
        got = read(position, expected_bytes.nbytes)
        if got.nbytes != expected_bytes.nbytes or not np.array_equal(got, expected_bytes):
            return False
        position += expected_bytes.nbytes
    return True


def check_tensors(
    reader: gguf.GGUFReader,
    plan: ConversionPlan,
    chunk_bytes: int = CHUNK_BYTES,
    path: Path | None = None,
) -> None:
    """Inventory (names, shapes, storage types), then every tensor's bytes.

    With *path*, tensor bytes are read with ``pread`` rather than through the
    reader's memory map, so the file's pages do not all count towards this process's
    resident memory (a 256 MB GGUF raised peak RSS by its size).

    Equal name sets also mean equal counts: GGUFReader refuses duplicate names.
    """
    planned = {t.name: t for t in plan.tensors}
    found = {t.name: t for t in reader.tensors}
    for name in planned:
        if name not in found:
            raise VerifyError("tensor_missing")
    for name in found:
        if name not in planned:
            raise VerifyError("tensor_unexpected")
    for name, tensor in found.items():
        source_shape = planned[name].shape
        if tuple(int(n) for n in tensor.shape) != tuple(reversed(source_shape)):
            raise VerifyError("tensor_shape_mismatch")
        qtype = storage_type(source_shape, plan.outtype)
        if tensor.tensor_type != qtype:
            raise VerifyError("tensor_dtype_mismatch")
    with contextlib.ExitStack() as stack:
        if path is None:

            def read(position: int, nbytes: int) -> npt.NDArray[np.uint8]:
                return np.asarray(reader.data[position : position + nbytes])
        else:
            fd = os.open(path, os.O_RDONLY)
            stack.callback(os.close, fd)

            def read(position: int, nbytes: int) -> npt.NDArray[np.uint8]:
                return np.frombuffer(os.pread(fd, nbytes, position), dtype=np.uint8)

        for name, tensor in found.items():
            if not _tensor_matches(read, tensor, plan, planned[name], chunk_bytes):
                raise VerifyError("tensor_data_mismatch")


def verify_gguf(
    gguf_path: Path, source: Path, outtype: OutType, expected_sha256: str | None = None
) -> VerifyReport:
    """Check *gguf_path* against *source* converted at *outtype*; then hash it."""
    try:
        plan = plan_conversion(source, outtype)
        config = load_json_object(source / "config.json")
    except (ConvertError, OSError, ValueError, TypeError) as exc:
        raise VerifyError("source_unreadable") from exc
    try:
        reader = gguf.GGUFReader(gguf_path, "r")
    except (OSError, ValueError, KeyError, IndexError, struct.error) as exc:
        raise VerifyError("gguf_unreadable") from exc
    expected = expected_metadata(config, plan)
    check_metadata(reader, expected)
    check_tensors(reader, plan, path=gguf_path)
    del reader
    digest, size = sha256_file(gguf_path)
    if expected_sha256 is not None and digest != expected_sha256:
        raise VerifyError("digest_mismatch")
    return VerifyReport(digest, size, len(expected), len(plan.tensors))
