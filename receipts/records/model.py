"""Model identity: which pinned source, which conversion, which GGUF bytes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from receipts.records.base import Part, Record
from receipts.types import ByteCount, Count, Millis, Provenance, Sha256Hex

ConverterId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9./=+ -]{0,63}$")]
"""The converter's fixed identifier, e.g. `harness-convert/1 gguf==0.19.0`."""

ModelCategory = Literal[
    "ok",
    "pins_missing",
    "pin_unlisted_file",
    "pin_missing_file",
    "pin_size_mismatch",
    "pin_digest_mismatch",
    "pin_symlink",
    "config_contradicts_profile",
    "source_unreadable",
    "source_fetch_failed",
    "conversion_failed",
    "insufficient_disk_space",
    "disk_full",
    "gguf_metadata_mismatch",
    "gguf_tensor_inventory_mismatch",
    "gguf_tensor_data_mismatch",
    "cache_corrupt",
]

GgufFileType = Literal["f32", "f16", "bf16", "q8_0", "q4_1", "other"]


class TensorCounts(Part):
    """How many tensors of each dtype the GGUF holds (fixed keys, no free mapping)."""

    f32: Count
    f16: Count
    bf16: Count
    q8_0: Count
    q4_1: Count
    other: Count


class ModelFields(Record):
    """The fields of every version; what the three timings cover is the version's."""

    category: ModelCategory
    source_kind: Literal["synth", "pypi_wheel", "hf_snapshot"]
    pins_from: Literal["profile", "operator_lock"]
    pin_sha256: Sha256Hex | None
    """Digest of the canonical pin table the source was verified against."""
    conversion: Literal["converted", "none"]
    converter_version: ConverterId | None
    file_type: GgufFileType | None
    tensors: TensorCounts | None
    gguf_size_bytes: ByteCount | None
    gguf_sha256: Sha256Hex | None
    cache_key: Sha256Hex | None
    provenance: Provenance | None
    verify_source_ms: Millis
    convert_ms: Millis
    verify_gguf_ms: Millis


class ModelRecord(ModelFields):
    """`model/2`: the timings of the one-pass preparation (host/model: each source shard
    read once, hashed as it is converted). `model/1` wrote the same fields, but a harness
    before the one pass timed a separate pre-hash of every shard under `verify_source_ms`
    and a re-hash under `verify_gguf_ms`, so a `model/1` timing does not say which it
    covered (receipts/records/legacy.py)."""

    schema_: Literal["harness.receipt.model/2"] = Field("harness.receipt.model/2", alias="schema")
    verify_source_ms: Millis
    """Checking the source before conversion: the tree, and every pinned file that is not
    a weights shard (shards are hashed during the conversion's one pass); on adoption,
    every file. For the synthesized model, synthesis too."""
    convert_ms: Millis
    """The one pass of a build: shards read, hashed against their pins and converted, the
    GGUF written, hashed, checked as written and made durable. 0 on adoption."""
    verify_gguf_ms: Millis
    """After the pass: the written header read back and checked, the small files (and any
    shard read out of order) hashed again. On adoption: the GGUF re-hashed."""
