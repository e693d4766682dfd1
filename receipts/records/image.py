"""The guest image: a content key over its recipe, and whether this run built it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import ByteCount, DebianPackage, Millis, Provenance, Sha256Hex

ImageCategory = Literal[
    "ok",
    "fetch_failed",
    "build_failed",
    "kernel_unavailable",
    "rootfs_failed",
    "cache_corrupt",
    "disk_full",
]


class ImageRecord(Record):
    schema_: Literal["harness.receipt.image/1"] = Field("harness.receipt.image/1", alias="schema")
    category: ImageCategory
    image_key: Sha256Hex | None
    provenance: Provenance | None
    kernel_package: DebianPackage | None
    kernel_sha256: Sha256Hex | None
    initramfs_sha256: Sha256Hex | None
    base_sha256: Sha256Hex | None
    base_size_bytes: ByteCount | None
    build_ms: Millis
