"""The inference worker: where it ran, what it loaded, and one record per request.

No text of prompts or outputs appears here: only decisions, counts and timings.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, model_validator

from receipts.records.base import Part, Record
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

WorkerErrorCodeV2 = Literal[
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
so it is refused rather than returned shortened. `tool_argument_too_many_items`
(`worker_request/3`): likewise for an array as long as the grammar's item cap.
`tool_schema_too_complex`: a tool schema past a compile bound (nesting, size, expanded
size or time; docs/worker-limits.md). `request_too_complex`: a body with more JSON
containers or commas than the parser is allowed to build. `request_timeout`: the body
did not arrive in time."""

WorkerErrorCode = WorkerErrorCodeV2 | Literal["tool_argument_too_many_items"]
"""The codes of `worker_request/3`: those of /2 and the array cap's refusal."""

ToolsRendering = Literal["template", "generic", "none", "not_rendered"]
"""How the request's tools, tool calls and tool results reached the model: `template` the
model's chat template rendered them; `generic` the template cannot, so the worker wrote
them in its generic format (docs/worker.md); `none` the request had no tools and no tool
turns; `not_rendered` the request ended before its prompt was rendered."""

Admission = Literal["admitted", "refused", "not_evaluated"]
"""`not_evaluated`: the request was rejected (bad input, queue full) before admission ran."""


RequestCut = Literal["max_tokens", "text_chars", "tool_string_chars", "tool_array_items"]
"""Which cap a request's output reached where the model had more to say: the request's
`max_tokens` (finish `length`); the grammar's cap on a text answer's characters (finish
`length`: the text is returned, cut); a tool-call string at the grammar's character cap
or an array at its item cap (refused, `tool_argument_too_long` /
`tool_argument_too_many_items`: a call that may have been cut is never returned)."""

ConnectionRefusal = Literal["over_limit", "header_timeout", "body_timeout", "unframed"]
"""Why the worker's server closed a connection before any request on it reached the
chat endpoint, so no request record could say so: over the connection limit (503),
headers or body not in within their timeout (408), or bytes HTTP cannot frame (400).
Each is one line of `WorkerConnectionLine` in the worker's records file."""


class WorkerConnectionLine(Record):
    """One connection the server refused (the line the worker appends to its records file,
    beside the request records); the worker record counts them."""

    schema_: Literal["harness.receipt.worker_connection/1"] = Field(
        "harness.receipt.worker_connection/1", alias="schema"
    )
    refusal: ConnectionRefusal


class ConnectionRefusals(Part):
    """How many connections the server refused, by cause (fixed keys)."""

    over_limit: Count
    header_timeout: Count
    body_timeout: Count
    unframed: Count


class WorkerFieldsV1(Record):
    """What `worker/1` recorded, and every later version still records."""

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


class WorkerRecord(WorkerFieldsV1):
    schema_: Literal["harness.receipt.worker/2"] = Field("harness.receipt.worker/2", alias="schema")
    connections_refused: ConnectionRefusals
    """Counted from the worker's connection lines, read with its request records (all 0
    when they were not read: the category then says `records_invalid` or why)."""


class WorkerRequestFieldsV2(Record):
    """What `worker_request/2` recorded, and every later version still records."""

    index: Index
    admission: Admission
    headroom_bytes: ByteCount | None
    need_bytes: ByteCount
    floor_bytes: ByteCount
    guard_bytes: ByteCount
    deciding_scope: DecidingScope | None
    outcome: RequestOutcome
    error_code: WorkerErrorCodeV2 | None
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


class WorkerRequestRecord(WorkerRequestFieldsV2):
    schema_: Literal["harness.receipt.worker_request/3"] = Field(
        "harness.receipt.worker_request/3", alias="schema"
    )
    error_code: WorkerErrorCode | None  # type: ignore[assignment]  # /3's codes extend /2's
    cut: RequestCut | None
    """The cap the output reached (`RequestCut`); None when it ended on its own (stop,
    a whole tool call) or never began."""

    @model_validator(mode="after")
    def _cut_is_the_ending(self) -> WorkerRequestRecord:
        if self.cut in _CUT_BY_LENGTH or self.outcome == "length":
            agrees = self.cut in _CUT_BY_LENGTH and self.outcome == "length"
        else:
            agrees = _CUT_REFUSAL.get(self.cut) == self.error_code or (
                self.cut is None and self.error_code not in _CUT_REFUSAL.values()
            )
        if not agrees:
            raise ValueError("a request's cut and its ending tell one story")
        return self


_CUT_BY_LENGTH: Final = frozenset({"max_tokens", "text_chars"})
"""The caps whose cut output is returned (finish and outcome `length`)."""

_CUT_REFUSAL: Final[dict[RequestCut | None, WorkerErrorCode]] = {
    "tool_string_chars": "tool_argument_too_long",
    "tool_array_items": "tool_argument_too_many_items",
}
"""The caps whose cut tool call is refused, and the code it is refused with."""
