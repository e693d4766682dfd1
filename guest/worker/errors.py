"""OpenAI-shaped error bodies with stable codes.

`{"error": {"message", "type", "param", "code"}}` is what the `openai` SDK parses into
its exception classes. Messages are fixed per code (plus the parameter's name): never
the input, never exception text.
"""

from __future__ import annotations

from typing import Final, Literal

from receipts.canonical import canonical
from receipts.records.worker import WorkerErrorCode

HttpErrorCode = WorkerErrorCode | Literal["not_found", "method_not_allowed", "too_many_connections"]
"""Codes outside `WorkerErrorCode` answer no chat request (an unknown route, a connection
refused over the limit), so no request record carries them."""

MESSAGES: Final[dict[str, str]] = {
    "body_too_large": "Request body exceeds the size limit.",
    "content_length_required": "A Content-Length header is required.",
    "invalid_content_length": "Content-Length must be a non-negative decimal integer.",
    "invalid_http_request": "The HTTP request could not be parsed.",
    "invalid_json": "The body is not valid JSON.",
    "duplicate_key": "The body contains a duplicate object key.",
    "non_finite_number": "The body contains NaN or an infinite number.",
    "invalid_request": "Invalid value for a request parameter.",
    "unsupported_tool_schema": "A tool's parameters schema uses an unsupported keyword.",
    "tool_schema_too_complex": "A tool's parameters schema exceeds the worker's compile limits.",
    "request_timeout": "The request was not received in time.",
    "request_too_complex": "The body holds more JSON values than the worker parses.",
    "too_many_connections": "Too many open connections; retry later.",
    "model_not_found": "The requested model is not served here.",
    "context_length_exceeded": "The prompt and max_tokens exceed the context length.",
    "queue_full": "Too many requests are queued; retry later.",
    "insufficient_memory_headroom": "Not enough memory headroom to admit this request.",
    "headroom_unread": "Memory headroom could not be read; request refused.",
    "memory_pressure": "Generation stopped: memory headroom fell below the runtime guard.",
    "deadline_exceeded": "Generation stopped: the request deadline passed.",
    "client_disconnected": "The client disconnected.",
    "shutting_down": "The worker is shutting down.",
    "invalid_model_output": "The model produced output that failed validation.",
    "constraint_unavailable": "The output constraint could not be built.",
    "tool_argument_too_long": "A tool-call string reached the worker's length cap.",
    "tool_argument_too_many_items": "A tool-call array reached the worker's item cap.",
    "internal_error": "Internal error.",
    "not_found": "No such endpoint.",
    "method_not_allowed": "Method not allowed.",
}

_TYPES: Final[dict[int, str]] = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(status: int, code: HttpErrorCode, param: str | None = None) -> bytes:
    message = MESSAGES[code]
    if param is not None:
        message = f"{message} (parameter: {param})"
    kind = _TYPES.get(status, "server_error")
    return canonical({"error": {"message": message, "type": kind, "param": param, "code": code}})
