"""Memory headroom over the trial, sampled at a fixed interval (for the report's plot)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from receipts.records.base import Part, Record
from receipts.records.worker import DecidingScope
from receipts.types import ByteCount, Millis


class HeadroomSample(Part):
    at_ms: Millis
    """Milliseconds since the trial started."""
    headroom_bytes: ByteCount
    deciding_scope: DecidingScope


class MemoryRecord(Record):
    schema_: Literal["harness.receipt.memory/1"] = Field("harness.receipt.memory/1", alias="schema")
    interval_ms: Annotated[int, Field(ge=1, le=60_000)]
    samples: Annotated[tuple[HeadroomSample, ...], Field(max_length=1000)]
