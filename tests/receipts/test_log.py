"""The log field policy: only allowlisted, scalar, identifier-like fields get through."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import structlog

from receipts.log import configure_logging, field_policy

MODEL_TEXT = "Sure! Here is the fix:\n```python\nreturn a + b\n```"


def _apply(**event: object) -> dict[str, object]:
    return dict(field_policy(None, "info", dict(event)))


def test_allowlisted_scalar_fields_pass() -> None:
    out = _apply(event="stage.done", stage="vm", duration_ms=12, valid=True)
    assert out == {"event": "stage.done", "stage": "vm", "duration_ms": 12, "valid": True}


def test_unknown_field_is_dropped_and_named() -> None:
    out = _apply(event="worker.reply", content=MODEL_TEXT)
    assert "content" not in out
    assert out["refused_fields"] == "content"
    assert MODEL_TEXT not in json.dumps(out)


def test_field_outside_the_allowlist_is_dropped_even_with_a_tidy_value() -> None:
    out = _apply(event="ssh.connect", password="hunter2", port=2222)
    assert out == {"event": "ssh.connect", "port": 2222, "refused_fields": "password"}


def test_allowed_field_with_free_text_value_is_dropped() -> None:
    out = _apply(event="agent.turn", outcome=MODEL_TEXT, tool={"name": "x"})
    assert "outcome" not in out and "tool" not in out
    assert out["refused_fields"] == "outcome,tool"


def test_free_text_event_is_replaced() -> None:
    out = _apply(event=MODEL_TEXT)
    assert out["event"] == "refused_event"


def test_exception_text_is_reduced_to_its_type() -> None:
    def fail() -> None:
        raise ValueError(MODEL_TEXT)

    try:
        fail()
    except ValueError:
        out = _apply(event="agent.error", exc_info=True)
    assert out["exception_type"] == "ValueError"
    assert MODEL_TEXT not in json.dumps(out)


def test_json_log_format_end_to_end() -> None:
    code = (
        "import structlog, logging; from receipts.log import configure_logging;"
        "configure_logging('json', logging.INFO);"
        f"structlog.get_logger().info('worker.reply', tokens=3, text={MODEL_TEXT!r})"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    line = json.loads(result.stderr)
    assert line["event"] == "worker.reply" and line["tokens"] == 3
    assert list(line) == sorted(line)  # keys in one order: lines diff and grep alike
    assert line["timestamp"].endswith("Z")  # UTC, whatever the machine's zone
    assert line["refused_fields"] == "text"
    assert "Sure!" not in result.stderr and result.stdout == ""


def test_logging_follows_stderr_after_the_configured_stream_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream replaced and closed after configure (a test capture, a daemonising
    parent) must not make every later log call raise ValueError in its caller."""
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging("json")
    first.close()
    monkeypatch.setattr(sys, "stderr", second)
    structlog.get_logger().warning("squeue_failed")
    assert '"event": "squeue_failed"' in second.getvalue()


def test_an_exception_given_as_a_tuple_or_an_instance_is_named_by_its_type() -> None:
    """`exc_info` may be `True`, a `sys.exc_info()` tuple or the exception itself: each
    is reduced to the exception's type name, never its text."""

    def fail() -> None:
        raise KeyError(MODEL_TEXT)

    try:
        fail()
    except KeyError as exc:
        as_tuple = _apply(event="agent.error", exc_info=sys.exc_info())
        as_instance = _apply(event="agent.error", exc_info=exc)
    assert as_tuple["exception_type"] == as_instance["exception_type"] == "KeyError"
    assert MODEL_TEXT not in json.dumps([as_tuple, as_instance])


def test_a_logger_made_before_a_reconfiguration_follows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Module loggers are made at import, before the CLI reads `--log-format`: a logger
    that has logged once still renders with the configuration made after (loggers are
    not cached on first use)."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("console")
    logger = structlog.get_logger("test")
    logger.info("stage.done")
    configure_logging("json")
    logger.info("stage.done", stage="vm")
    last = out.getvalue().splitlines()[-1]
    assert json.loads(last)["stage"] == "vm"
