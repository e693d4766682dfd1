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
  encoding by ``gguf.quants.quantize`` (skipped only where that encoding is provably
  the identity: see ``IDENTITY_EXCEPT_NAN``);
- and the file's SHA-256, taken of the very bytes that were checked as they were
  read (one pass, :class:`HashingReader`), compared with the digest the converter
  recorded once every check has passed.

The token list, merges and special ids are compared with what ``host.model.vocab``
reads from ``tokenizer.json`` (shared with the converter; the llama.cpp tokenization
parity test is what checks that reading).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import struct
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt

from host import cancel
from host.model.categories import ConvertError, HeaderError, OutType, VerifyError
from host.model.convert import CHUNK_BYTES, ConversionPlan, TensorPlan, plan_conversion
from host.model.ggufread import GGUFReader
from host.model.progress import current as current_progress
from host.model.safetensors_header import DTYPES, read_raw, read_span, row_span, widen
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


GENERAL_TYPES = {
    "int32": [V.INT32],
    "float32": [V.FLOAT32],
    "string": [V.STRING],
    "strings": [V.ARRAY, V.STRING],
}


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
    if special.add_sep is not None:
        expected["tokenizer.ggml.add_sep_token"] = ([V.BOOL], special.add_sep)
    for general in plan.general:
        value: Any = general.value
        if general.kind == "float32":
            value = np.float32(value)
        elif general.kind == "strings":
            value = list(value)
        expected[general.key] = (GENERAL_TYPES[general.kind], value)
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
            raise VerifyError("metadata_missing", key)
    for key, field in present.items():
        if key not in expected:
            raise VerifyError("metadata_unexpected", key)
        types, value = expected[key]
        if field.types != types or _field_value(field) != value:
            raise VerifyError("metadata_mismatch", key)


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


# Storage types for which gguf.quants' encoding of the widened source value gives back
# the stored bits, for every value that is not a NaN: F32 is ``astype(float32)``; F16
# and BF16 widen exactly to float32, and narrowing an exactly representable value is
# exact. (tests/host/model/test_verify_gguf.py checks the F16 and BF16 claims on all
# 65,536 bit patterns.) For these, a source slice without NaN whose stored bytes equal
# the GGUF's bytes needs no re-encoding; anything else is re-encoded and compared.
IDENTITY_EXCEPT_NAN = {"F32": Q.F32, "F16": Q.F16, "BF16": Q.BF16}
# (mask, largest non-NaN value under the mask) of a 16-bit float's bits
NAN_BITS = {"F16": (0x7FFF, 0x7C00), "BF16": (0x7FFF, 0x7F80)}


def has_nan(raw: npt.NDArray[Any], dtype: str) -> bool:
    """Whether stored values *raw* of *dtype* hold a NaN (F32 never needs to know).

    A 16-bit NaN has all exponent bits and a non-zero mantissa: below the sign bit,
    its bits exceed the largest non-NaN pattern. Read as signed, positive NaNs are the
    largest values; read as unsigned, negative ones are: two read-only maxima, no
    masked temporary.
    """
    if dtype not in NAN_BITS or raw.size == 0:
        return False
    mask, limit = NAN_BITS[dtype]
    bits = raw.view(np.uint16)
    return int(bits.view(np.int16).max()) > limit or int(bits.max()) > (~mask & 0xFFFF) | limit


def _source_slices(
    plan: ConversionPlan, tensor: TensorPlan, chunk_bytes: int
) -> Iterator[tuple[bytes, npt.NDArray[Any]]]:
    """Stored source bytes and values in whole-row slices, q/k rows permuted (those
    are read whole)."""
    hp = plan.hparams
    entry = tensor.entry
    heads = None
    if hp.arch == gguf.MODEL_ARCH.LLAMA and tensor.name.endswith(".attn_q.weight"):
        heads = hp.heads
    elif hp.arch == gguf.MODEL_ARCH.LLAMA and tensor.name.endswith(".attn_k.weight"):
        heads = hp.kv_heads
    try:
        if heads is not None or len(tensor.shape) == 1:
            values = read_raw(tensor.source_file, entry)
            if heads is not None:
                values = values[permutation_rows(values.shape[0], heads)]
            yield values.tobytes(), values
            return
        rows = tensor.shape[0]
        dtype = np.dtype(DTYPES[entry.dtype][1])
        step = max(1, chunk_bytes // (math.prod(tensor.shape[1:]) * 4))
        for start in range(0, rows, step):
            stop = min(rows, start + step)
            data = read_span(tensor.source_file, *row_span(entry, start, stop))
            yield data, np.frombuffer(data, dtype=dtype).reshape(stop - start, *tensor.shape[1:])
    except (OSError, HeaderError, ValueError) as exc:
        raise VerifyError("source_unreadable") from exc


def _tensor_matches(
    read: Callable[[int, int], bytes],
    stored: gguf.ReaderTensor,
    plan: ConversionPlan,
    tensor: TensorPlan,
    chunk_bytes: int,
) -> bool:
    """Compare the stored bytes with the source slice by slice.

    A slice is equal when its stored source bytes are (for a storage type the source
    already has, and no NaN in the slice), or else when ``gguf.quants`` encoding of
    the source values is.
    """
    qtype = storage_type(tensor.shape, plan.outtype)
    dtype = tensor.entry.dtype
    same_type = IDENTITY_EXCEPT_NAN.get(dtype) == qtype
    position = stored.data_offset
    for data, raw in _source_slices(plan, tensor, chunk_bytes):
        if same_type:
            got = read(position, len(data))
            if got == data and not has_nan(raw, dtype):
                position += len(data)
                continue
        expected = gguf.quants.quantize(widen(raw, dtype), qtype).tobytes()
        if not same_type:
            got = read(position, len(expected))
        if got != expected:
            return False
        position += len(expected)
    return True


class HashingReader:
    """Reads a file forward once and hashes every byte of it, in file order.

    Why: verification reads every tensor's bytes anyway; hashing those same bytes
    (and the header and padding between them) as they are compared makes the digest
    one of the bytes that were checked, and saves a second pass over the file. The
    hash runs on one thread (hashlib releases the GIL) while the caller compares.
    Reads must move forward; a read behind the hashed offset (overlapping tensors in a
    hostile file) is served but not hashed again.
    """

    def __init__(self, fd: int, total: int, pending: int = 2) -> None:
        self._fd = fd
        self.offset = 0
        self._digest = hashlib.sha256()
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-hash")
        self._pending: deque[Future[None]] = deque()
        self._limit = pending
        self._bar = current_progress()
        self._bar.begin("verify gguf", total)

    def _hash(self, data: bytes) -> None:
        cancel.check()  # every read passes here: a cancelled trial stops within one chunk
        while len(self._pending) >= self._limit:  # bound the bytes held for hashing
            self._pending.popleft().result()
        self._pending.append(self._hasher.submit(self._digest.update, data))
        self.offset += len(data)
        self._bar.advance(len(data))

    def _skip_to(self, position: int) -> None:
        while self.offset < position:
            data = os.pread(self._fd, min(CHUNK_BYTES, position - self.offset), self.offset)
            if not data:
                return
            self._hash(data)

    def read(self, position: int, nbytes: int) -> bytes:
        """``nbytes`` at ``position`` (fewer at the end of the file)."""
        if position < self.offset:
            return os.pread(self._fd, nbytes, position)
        self._skip_to(position)
        data = os.pread(self._fd, nbytes, position) if self.offset == position else b""
        self._hash(data)
        return data

    def finish(self) -> tuple[str, int]:
        """Hash the rest of the file; return (SHA-256, size) of everything read."""
        while data := os.pread(self._fd, CHUNK_BYTES, self.offset):
            self._hash(data)
        while self._pending:
            self._pending.popleft().result()
        return self._digest.hexdigest(), self.offset

    def close(self) -> None:
        """Stop the hashing thread and the progress bar."""
        self._hasher.shutdown(wait=True)
        self._bar.end()


@contextlib.contextmanager
def open_hashing(path: Path) -> Iterator[HashingReader]:
    """A :class:`HashingReader` over *path*; the file and the hashing thread are
    released on leaving, whatever happened."""
    fd = os.open(path, os.O_RDONLY)
    try:
        hashing = HashingReader(fd, os.fstat(fd).st_size)
        try:
            yield hashing
        finally:
            hashing.close()
    finally:
        os.close(fd)


def check_tensors(
    reader: gguf.GGUFReader,
    plan: ConversionPlan,
    chunk_bytes: int = CHUNK_BYTES,
    hashing: HashingReader | None = None,
) -> None:
    """Inventory (names, shapes, storage types), then every tensor's bytes, in file order.

    With *hashing*, tensor bytes are read through it (``pread``) rather than through
    the reader's memory map, so the file's pages do not all count towards this
    process's resident memory (a 256 MB GGUF raised peak RSS by its size), and the
    file is hashed as it is checked.
    """
    found = check_inventory(reader, plan)
    planned = {t.name: t for t in plan.tensors}
    if hashing is None:

        def read(position: int, nbytes: int) -> bytes:
            return reader.data[position : position + nbytes].tobytes()
    else:
        read = hashing.read
    for tensor in sorted(found.values(), key=lambda t: int(t.data_offset)):
        if not _tensor_matches(read, tensor, plan, planned[tensor.name], chunk_bytes):
            raise VerifyError("tensor_data_mismatch", tensor.name)


def check_inventory(reader: gguf.GGUFReader, plan: ConversionPlan) -> dict[str, gguf.ReaderTensor]:
    """Names, shapes and storage types of the file's tensors, as the plan implies.

    Equal name sets also mean equal counts: GGUFReader refuses duplicate names.
    """
    planned = {t.name: t for t in plan.tensors}
    found = {t.name: t for t in reader.tensors}
    for name in planned:
        if name not in found:
            raise VerifyError("tensor_missing", name)
    for name in found:
        if name not in planned:
            raise VerifyError("tensor_unexpected", name)
    for name, tensor in found.items():
        source_shape = planned[name].shape
        if tuple(int(n) for n in tensor.shape) != tuple(reversed(source_shape)):
            raise VerifyError("tensor_shape_mismatch", name)
        qtype = storage_type(source_shape, plan.outtype)
        if tensor.tensor_type != qtype:
            raise VerifyError("tensor_dtype_mismatch", name)
    return found


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
        reader = GGUFReader(gguf_path, "r")  # gguf.GGUFReader, over a plain view
    except (OSError, ValueError, KeyError, IndexError, struct.error) as exc:
        raise VerifyError("gguf_unreadable") from exc
    expected = expected_metadata(config, plan)
    check_metadata(reader, expected)
    with open_hashing(gguf_path) as hashing:
        check_tensors(reader, plan, hashing=hashing)
        digest, size = hashing.finish()
    del reader
    if expected_sha256 is not None and digest != expected_sha256:
        raise VerifyError("digest_mismatch")
    return VerifyReport(digest, size, len(expected), len(plan.tensors))


def _permuted_heads(plan: ConversionPlan, name: str) -> int | None:
    """Heads of the Llama q/k permutation for GGUF tensor *name*, by the GGUF name."""
    hp = plan.hparams
    if hp.arch == gguf.MODEL_ARCH.LLAMA and name.endswith(".attn_q.weight"):
        return hp.heads
    if hp.arch == gguf.MODEL_ARCH.LLAMA and name.endswith(".attn_k.weight"):
        return hp.kv_heads
    return None


def _stored_nbytes(shape: tuple[int, ...], qtype: Q) -> int:
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    return math.prod(shape[:-1]) * (shape[-1] // block) * type_size


class InWriteCheck:
    """Each tensor checked as it is written, against this module's own expectation.

    Why: reading an 8 GB GGUF back, and its source a second time, to compare them cost
    more than the conversion itself. The bytes are in memory as they are written, so
    they are compared there. For every tensor, in write order:

    - the source bytes it was made from are exactly its span in the shard, read in
      order (no gap, no overlap, nothing past its end);
    - its written size is the one its storage type (:func:`storage_type`, this module's
      own rule) implies for its shape;
    - its bytes equal what the verifier expects of those source bytes: the stored bytes
      themselves where the storage type is the source's (a chunk written straight from
      the buffer it was read into, or one compared byte for byte, with the q/k rows
      permuted by :func:`permutation_rows`), else ``gguf.quants`` of the widened values.

    :meth:`verify_written` then reads the written header back with ``GGUFReader`` and
    checks the metadata, the inventory, and that each tensor's data offset and size in
    the header are where and how much this check saw written.

    What it does not prove: that the file's bytes on the disk are the bytes written (a
    device or filesystem that corrupts data after a successful ``fsync``). That is what
    a read-back would add, and it is made where the file is used: adopting the entry
    (every trial's model stage, ``harness model verify``) re-hashes the GGUF cold and
    compares it with the digest of the bytes written (host/model/cache.py ``adopt``).
    Nor does it re-test a chunk copied as is for NaN: the converter's own NaN test chose
    the copy (its bit-pattern tests cover every 16-bit value). :func:`verify_gguf`, the
    whole read-back against the source, remains for tests and benchmarks.
    """

    def __init__(self, plan: ConversionPlan) -> None:
        self._plan = plan
        self.written: dict[str, tuple[int, int]] = {}  # name -> (data offset, bytes)
        self._tensor: TensorPlan | None = None
        self._start = self._source = self._count = 0

    def begin(self, tensor: TensorPlan, offset: int) -> None:
        """*tensor*'s data starts at file *offset*."""
        self._tensor = tensor
        self._start, self._source, self._count = offset, tensor.entry.begin, 0

    def _refuse(self) -> VerifyError:
        assert self._tensor is not None
        return VerifyError("tensor_data_mismatch", self._tensor.name)

    def chunk(self, source_offset: int, source: Any, written: Any) -> None:
        """*written* was made from stored *source* bytes at *source_offset*."""
        tensor = self._tensor
        if tensor is None or source_offset != self._source:
            raise self._refuse()
        src = memoryview(source).cast("B")
        out = memoryview(written).cast("B")
        self._source += src.nbytes
        self._count += out.nbytes
        if self._source > tensor.entry.end:
            raise self._refuse()
        dtype = tensor.entry.dtype
        qtype = storage_type(tensor.shape, self._plan.outtype)
        same_type = IDENTITY_EXCEPT_NAN.get(dtype) == qtype
        heads = _permuted_heads(self._plan, tensor.name)
        if same_type and heads is None and written is source:
            return  # the very buffer that was read (and hashed) was written
        try:
            raw = np.frombuffer(src, dtype=np.dtype(DTYPES[dtype][1]))
            raw = raw.reshape(-1, *tensor.shape[1:])
        except ValueError:  # not whole values or rows of this tensor: no chunk of it
            raise self._refuse() from None
        if heads is not None:
            if src.nbytes != tensor.entry.nbytes:
                raise self._refuse()
            raw = raw[permutation_rows(raw.shape[0], heads)]
        if same_type and not has_nan(raw, dtype):
            expected = raw.tobytes()
        else:
            expected = gguf.quants.quantize(widen(raw, dtype), qtype).tobytes()
        if out != expected:
            raise self._refuse()

    def end(self, offset: int) -> None:
        """The current tensor ended at file *offset*: all of its source, its size."""
        tensor = self._tensor
        if tensor is None:
            raise VerifyError("tensor_data_mismatch")
        qtype = storage_type(tensor.shape, self._plan.outtype)
        if (
            self._source != tensor.entry.end
            or offset - self._start != self._count
            or self._count != _stored_nbytes(tensor.shape, qtype)
            or tensor.name in self.written
        ):
            raise self._refuse()
        self.written[tensor.name] = (self._start, self._count)
        self._tensor = None


def verify_written(
    gguf_path: Path, config: dict[str, Any], plan: ConversionPlan, check: InWriteCheck
) -> int:
    """The header of a GGUF written under *check*: metadata, inventory, and each
    tensor's data offset and size as written. Reads the header only (the tensor data
    was checked as it was written); returns the number of metadata keys checked."""
    try:
        reader = GGUFReader(gguf_path, "r")
    except (OSError, ValueError, KeyError, IndexError, struct.error) as exc:
        raise VerifyError("gguf_unreadable") from exc
    expected = expected_metadata(config, plan)
    check_metadata(reader, expected)
    found = check_inventory(reader, plan)
    if set(check.written) != set(found):
        missing = sorted(set(found) ^ set(check.written))
        raise VerifyError("tensor_data_mismatch", missing[0])
    for name, tensor in found.items():
        if (int(tensor.data_offset), int(tensor.n_bytes)) != check.written[name]:
            raise VerifyError("tensor_data_mismatch", name)
    del reader
    return len(expected)
