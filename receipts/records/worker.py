"""The inference worker: where it ran, what it loaded, and one record per request.

No text of prompts or outputs appears here: only decisions, counts and timings.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from receipts.records.base import Record
from receipts.types import ByteCount, Count, Index, Millis, Sha256Hex
from receipts.vocabulary import Channel, Placement

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
    "records_invalid",
]
"""How the worker stage ended. `records_invalid`: the worker's request records were not
strict JSON of their schema, so none was kept and every count is 0 because nothing was
read, not because nothing happened."""

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
    "rejected_invalid_request",
    "error",
]

WorkerErrorCode = Literal[
    "body_too_large",
    "content_length_required",
    "invalid_content_length",
    "invalid_http_request",
    "invalid_json",
    "duplicate_key",
    "non_finite_number",
    "invalid_request",
    "unsupported_tool_schema",
    "tool_schema_too_complex",
    "request_too_complex",
    "request_timeout",
    "model_not_found",
    "context_length_exceeded",
    "queue_full",
    "insufficient_memory_headroom",
    "headroom_unread",
    "memory_pressure",
    "deadline_exceeded",
    "client_disconnected",
    "shutting_down",
    "invalid_model_output",
    "constraint_unavailable",
    "tool_argument_too_long",
    "internal_error",
]
"""The stable `error.code` of the worker's OpenAI-shaped error bodies.
`tool_argument_too_long`: a generated tool call held a string as long as the grammar's
cap (`--max-string-chars`), where the grammar made it stop; the call may have been cut,
so it is refused rather than returned shortened.
`tool_schema_too_complex`: a tool schema past a compile bound (nesting, size, expanded
size or time; docs/worker-limits.md). `request_too_complex`: a body with more JSON
containers or commas than the parser is allowed to build. `request_timeout`: the body
did not arrive in time."""

ToolsRendering = Literal["template", "generic", "none", "not_rendered"]
"""How the request's tools, tool calls and tool results reached the model: `template` the
model's chat template rendered them; `generic` the template cannot, so the worker wrote
them in its generic format (docs/worker.md); `none` the request had no tools and no tool
turns; `not_rendered` the request ended before its prompt was rendered."""

Admission = Literal["admitted", "refused", "not_evaluated"]
"""`not_evaluated`: the request was rejected (bad input, queue full) before admission ran."""


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
    oom_kills: Count | None
    """OOM kills in the worker's cgroup; None when it could not be read."""
    peak_rss_bytes: ByteCount | None
    load_ms: Millis
    duration_ms: Millis


class WorkerRequestRecord(Record):
    schema_: Literal["harness.receipt.worker_request/2"] = Field(
        "harness.receipt.worker_request/2", alias="schema"
    )
    index: Index
    admission: Admission
    headroom_bytes: ByteCount | None
    need_bytes: ByteCount
    floor_bytes: ByteCount
    guard_bytes: ByteCount
    deciding_scope: DecidingScope | None
    outcome: RequestOutcome
    error_code: WorkerErrorCode | None
    http_status: Annotated[int, Field(ge=100, le=599)]
    stream: bool
    tools_rendering: ToolsRendering
    constraint_backend: ConstraintBackend
    prompt_tokens: Count
    cached_prompt_tokens: Count
    completion_tokens: Count
    time_to_first_token_ms: Millis | None
    decode_ms: Millis
    min_headroom_bytes: ByteCount | None
    duration_ms: Millis
