"""Logging that cannot carry raw model text, stderr or secrets by accident.

Logs are not receipts, but they end up in CI output and bug reports. A structlog
processor admits only allowlisted field names, with scalar values; string values must
look like identifiers, categories or digests. Anything else is dropped and the names
of the dropped fields are logged instead, so a violation is visible without leaking.
Exceptions are reduced to their class name: exception text can quote model output.
Lives in receipts/ because the guest's worker logs too and may import only receipts.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import MutableMapping
from typing import Any, Final, Literal

import structlog

LogFormat = Literal["console", "json"]

ALLOWED_FIELDS: Final[frozenset[str]] = frozenset(
    {
        # structlog's own
        "event",
        "level",
        "timestamp",
        "logger",
        # what we log
        "stage",
        "category",
        "verdict",
        "outcome",
        "decision",
        "deciding_scope",
        "status",
        "resource",
        "evidence",
        "profile",
        "task",
        "policy",
        "placement",
        "channel",
        "backend",
        "accelerator",
        "tool",
        "rule",
        "trial_id",
        "receipt_id",
        "sha256",
        "cache_key",
        "provenance",
        "index",
        "count",
        "bytes",
        "tokens",
        "prompt_tokens",
        "completion_tokens",
        "headroom_bytes",
        "need_bytes",
        "duration_ms",
        "elapsed_ms",
        "deadline_ms",
        "exit_code",
        "pid",
        "port",
        "valid",
        "findings",
        "exception_type",
        "refused_fields",
    }
)

_EVENT = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")
_SAFE_STRING = re.compile(r"^[A-Za-z0-9_.:@+-]{0,128}$")


def _admissible(value: object) -> bool:
    if value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return _SAFE_STRING.fullmatch(value) is not None
    return False


def field_policy(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The structlog processor: keep allowlisted scalar fields, drop and name the rest."""
    refused: list[str] = []
    exc_info = event_dict.pop("exc_info", None)
    if exc_info:
        exc = sys.exc_info()[1] if exc_info is True else exc_info
        if isinstance(exc, tuple):
            exc = exc[1]
        event_dict["exception_type"] = type(exc).__name__ if exc is not None else None
    event = event_dict.get("event")
    if not isinstance(event, str) or _EVENT.fullmatch(event) is None:
        event_dict["event"] = "refused_event"
        refused.append("event")
    for key in list(event_dict):
        if key == "event":
            continue
        if key not in ALLOWED_FIELDS or not _admissible(event_dict[key]):
            del event_dict[key]
            refused.append(key if _EVENT.fullmatch(key) else "unnamed")
    if refused:
        event_dict["refused_fields"] = ",".join(sorted(set(refused)))
    return event_dict


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time of each write.

    Why: `PrintLoggerFactory(file=sys.stderr)` binds the stream object current at
    configure time. When that object is later replaced and closed (a test runner's
    capture, a daemonising parent), every log call raised `ValueError: I/O operation on
    closed file` and took its caller down with it: the Slurm executor's warning about a
    failed `squeue` crashed the whole suite run in the clean-clone test run."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: LogFormat = "console", level: int = logging.INFO) -> None:
    """Log to stderr (stdout is for command output), console for people, JSON for machines."""
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            field_policy,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]  # duck-typed TextIO
        cache_logger_on_first_use=False,
    )
