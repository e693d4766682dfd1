"""Memory over the whole trial, sampled by the orchestrator at a fixed interval.

Version 2 (what the harness writes): the host's MemAvailable and page cache, and the
usage and working set (`usage - inactive_file`) of the QEMU cgroup and of the host
worker's cgroup. A figure that could not be read, or whose cgroup did not exist yet (or
any more) at that moment, is None: never a guess (docs/engineering.md §2). When the
trial outlasts `MAX_SAMPLES` intervals the sampler keeps every other sample and doubles
the interval, so the samples always span the whole trial at an even spacing.

Version 1 (headroom and deciding scope per sample) is read by the audit only
(receipts/records/legacy.py).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from receipts.records.base import Part, Record
from receipts.types import ByteCount, Millis

MAX_SAMPLES: Final = 200
"""Keeps the record under the 64 KiB per-record ceiling: 200 samples with every figure at
its largest are 52,471 bytes (262 each)."""


class MemorySample(Part):
    at_ms: Millis
    """Milliseconds since the trial started."""
    host_available_bytes: ByteCount | None
    """The host's MemAvailable."""
    host_page_cache_bytes: ByteCount | None
    """The host's page cache (`Cached` in /proc/meminfo)."""
    qemu_usage_bytes: ByteCount | None
    """QEMU's memory cgroup: the agent's guest until it is released, then the verification
    guest (which may have started beside it: its own peak is in `verifier_vm.json`)."""
    qemu_working_set_bytes: ByteCount | None
    worker_usage_bytes: ByteCount | None
    """The host worker's cgroup (placement host); None with the worker in the guest."""
    worker_working_set_bytes: ByteCount | None


class MemoryRecord(Record):
    schema_: Literal["harness.receipt.memory/2"] = Field("harness.receipt.memory/2", alias="schema")
    interval_ms: Annotated[int, Field(ge=1, le=3_600_000)]
    samples: Annotated[tuple[MemorySample, ...], Field(max_length=MAX_SAMPLES)]
