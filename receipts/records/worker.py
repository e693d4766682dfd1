"""The inference worker: where it ran, what it loaded, and one record per request.

No text of prompts or outputs appears here: only decisions, counts and timings.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.records.trial import Channel, Placement
from receipts.types import ByteCount, Count, Index, Millis, Sha256Hex

WorkerCategory = Literal[
    "ok",
    "model_digest_mismatch",
    "model_load_failed",
    "model_load_out_of_memory",
    "model_file_unreadable",
    "constraint_unavailable",
    "worker_exited",
    "worker_unreachable",
    "oom_killed",
]

ConstraintBackend = Literal["llguidance", "gbnf", "none"]

DecidingScope = Literal["self", "ancestor", "host"]
"""Which level of the memory hierarchy had the least headroom."""

RequestOutcome = Literal[
    "stop",
    "length",
    "tool_calls",
    "invalid_model_output",
    "cancelled_deadline",
    "cancelled_client",
    "cancelled_shutdown",
    "cancelled_memory_pressure",
    "refused_headroom",
    "refused_queue_full",
    "error",
]


class WorkerRecord(Record):
    schema_: Literal["harness.receipt.worker/1"] = Field("harness.receipt.worker/1", alias="schema")
    category: WorkerCategory
    placement: Placement
    channel: Channel
    model_sha256: Sha256Hex
    constraint_backend: ConstraintBackend
    requests: Count
    admitted: Count
    refused: Count
    prompt_tokens_total: Count
    completion_tokens_total: Count
    oom_kills: Count
    peak_rss_bytes: ByteCount | None
    load_ms: Millis
    duration_ms: Millis


class WorkerRequestRecord(Record):
    schema_: Literal["harness.receipt.worker_request/1"] = Field(
        "harness.receipt.worker_request/1", alias="schema"
    )
    index: Index
    admission: Literal["admitted", "refused"]
    headroom_bytes: ByteCount | None
    need_bytes: ByteCount
    floor_bytes: ByteCount
    deciding_scope: DecidingScope | None
    outcome: RequestOutcome
    constraint_backend: ConstraintBackend
    prompt_tokens: Count
    completion_tokens: Count
    time_to_first_token_ms: Millis | None
    decode_ms: Millis
    min_headroom_bytes: ByteCount | None
    duration_ms: Millis
