"""`python -m guest.worker serve --model GGUF --sha256 HEX [--socket PATH | --port N] ...`

Prints one JSON line on stdout when ready (`{"ready": true, "port": N}`), so a parent
can wait for it; logs go to stderr through the allowlisting structlog configuration.
Exit codes: 0 after a clean shutdown, 3 when the model does not load (the category is
logged), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

import structlog

from guest.worker.app import ApiConfig, ChatEndpoint
from guest.worker.constraint import ConstraintFactory
from guest.worker.engine import Engine, EngineConfig
from guest.worker.loader import LoadError, LoadOptions, load_model
from guest.worker.records import RecordLog
from guest.worker.schema_grammar import Limits
from guest.worker.server import ConnectionLimits, bind_loopback, bind_unix, serve
from guest.worker.toolprep import ToolLimits
from receipts.canonical import canonical
from receipts.log import configure_logging

EXIT_LOAD_FAILED = 3


def _sha256(text: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise argparse.ArgumentTypeError("expected 64 lower-case hex digits")
    return text


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _nonnegative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not (0 < value <= 86_400):
        raise argparse.ArgumentTypeError("must be in (0, 86400] seconds")
    return value


def parser(prog: str = "python -m guest.worker") -> argparse.ArgumentParser:
    """The command line; `prog` is how the caller's user typed it (`harness worker` on a
    host, `python -m guest.worker` in the guest), so usage and errors name it so."""
    p = argparse.ArgumentParser(prog=prog, description="The inference worker.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser(
        "serve",
        help="serve a GGUF over an OpenAI-compatible API",
        description="Serve a GGUF over an OpenAI-compatible HTTP API. Prints one JSON line "
        'on stdout when ready ({"ready": true, "port": N, "model": ID}); logs go to stderr. '
        "Exit 0 after a clean shutdown, 3 when the model does not load, 2 for usage.",
    )
    s.add_argument("--model", type=Path, required=True, help="the GGUF file to serve")
    s.add_argument(
        "--sha256", type=_sha256, required=True, help="the GGUF's SHA-256, checked where it loads"
    )
    s.add_argument("--socket", type=Path, help="serve on this Unix socket")
    s.add_argument("--port", type=_nonnegative, help="127.0.0.1 only; 0 picks a free port")
    s.add_argument("--threads", type=_positive, default=1, help="llama.cpp threads (default 1)")
    s.add_argument(
        "--context", type=_positive, default=4096, help="context length in tokens (default 4096)"
    )
    s.add_argument(
        "--request-floor",
        type=_nonnegative,
        default=256 << 20,
        help="bytes of memory headroom a request needs to be admitted",
    )
    s.add_argument(
        "--runtime-guard",
        type=_nonnegative,
        default=128 << 20,
        help="bytes of headroom below which a running request is stopped",
    )
    s.add_argument(
        "--deadline-s", type=_positive, default=600, help="per-request deadline in seconds"
    )
    s.add_argument(
        "--max-tokens", type=_positive, default=1024, help="ceiling on tokens per completion"
    )
    s.add_argument(
        "--queue-depth",
        type=_nonnegative,
        default=4,
        help="requests waiting beyond the running one",
    )
    s.add_argument(
        "--constraint",
        choices=("llguidance", "gbnf"),
        default="llguidance",
        help="how tool-call output is constrained",
    )
    s.add_argument("--model-id", default=None, help="served model name (default gguf-<sha12>)")
    s.add_argument("--records", type=Path, help="append request records as canonical JSON lines")
    s.add_argument(
        "--max-string-chars",
        type=_positive,
        default=Limits.max_string_chars,
        help="longest string a tool-call argument may hold",
    )
    s.add_argument(
        "--max-array-items",
        type=_positive,
        default=Limits.max_array_items,
        help="most items a tool-call array may hold",
    )
    s.add_argument(
        "--max-text-chars",
        type=_positive,
        default=Limits.max_text_chars,
        help="longest text answer (in the tool grammar's units) beside tools",
    )
    s.add_argument(
        "--max-connections",
        type=_positive,
        default=ConnectionLimits.max_connections,
        help="open connections beyond this are answered 503 and closed",
    )
    s.add_argument(
        "--header-timeout-s",
        type=_seconds,
        default=ConnectionLimits.header_timeout_s,
        help="a request's headers must arrive within this (408, connection closed)",
    )
    s.add_argument(
        "--body-timeout-s",
        type=_seconds,
        default=ConnectionLimits.body_timeout_s,
        help="a request's body must arrive within this after its headers (408)",
    )
    s.add_argument(
        "--keepalive-s",
        type=_seconds,
        default=ConnectionLimits.keepalive_s,
        help="an idle kept-alive connection is closed after this",
    )
    s.add_argument(
        "--tool-compile-s",
        type=_seconds,
        default=ToolLimits.seconds,
        help="time limit for checking and compiling a request's tool schemas (400 past it)",
    )
    s.add_argument(
        "--close-connections",
        action="store_true",
        help="answer every response with `connection: close` (for a client that reuses "
        "a pooled connection the worker closed while idle)",
    )
    s.add_argument(
        "--tools-required",
        action="store_true",
        help="serve a request that offers tools with tool_choice auto as required (the "
        "model_tool_required policy for a client that asks auto), unless it prefills the answer",
    )
    s.add_argument(
        "--log-format", choices=("console", "json"), default="json", help="log rendering on stderr"
    )
    return p


def main(argv: list[str] | None = None, prog: str = "python -m guest.worker") -> int:
    args = parser(prog).parse_args(argv)
    if args.socket is None and args.port is None:
        parser(prog).error("give --socket PATH and/or --port N")
    configure_logging(args.log_format, logging.INFO)
    log = structlog.get_logger("guest.worker")
    try:
        model = load_model(args.model, args.sha256, LoadOptions(args.context, args.threads))
    except LoadError as exc:
        log.error("worker.load_failed", category=exc.category)  # noqa: TRY400 - no traceback text
        return EXIT_LOAD_FAILED
    log.info("worker.loaded", sha256=model.sha256, duration_ms=model.load_ms)
    # The matcher cache outlives every admitted request's compile (see ConstraintFactory).
    factory = ConstraintFactory(
        model.vocab, model.n_vocab, args.constraint, min_entries=args.queue_depth + 2
    )
    if args.constraint == "llguidance":
        factory.tokenizer()  # built once now, not inside the first request
    engine = Engine(
        model,
        EngineConfig(args.request_floor, args.runtime_guard, args.max_tokens),
        factory,
    )
    limits = Limits(
        max_string_chars=args.max_string_chars,
        max_array_items=args.max_array_items,
        max_text_chars=args.max_text_chars,
    )
    model_id = args.model_id or f"gguf-{model.sha256[:12]}"
    chat = ChatEndpoint(
        engine,
        ApiConfig(
            model_id,
            float(args.deadline_s),
            args.queue_depth,
            limits,
            ToolLimits(seconds=args.tool_compile_s),
            args.body_timeout_s,
            close_connections=args.close_connections,
            tools_required=args.tools_required,
        ),
        RecordLog(args.records),
    )
    sockets = []
    if args.socket is not None:
        sockets.append(bind_unix(args.socket))
    port = None
    if args.port is not None:
        tcp = bind_loopback(args.port)
        port = tcp.getsockname()[1]
        sockets.append(tcp)
    sys.stdout.write(canonical({"ready": True, "port": port, "model": model_id}).decode() + "\n")
    sys.stdout.flush()
    try:
        serve(
            chat,
            sockets,
            ConnectionLimits(
                max_connections=args.max_connections,
                header_timeout_s=args.header_timeout_s,
                body_timeout_s=args.body_timeout_s,
                keepalive_s=args.keepalive_s,
            ),
        )
    finally:
        chat.records.close()
        if args.socket is not None:
            args.socket.unlink(missing_ok=True)
    log.info("worker.stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
