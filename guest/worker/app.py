"""The HTTP API: `POST /v1/chat/completions`, `GET /v1/models`, `GET /health`,
`GET /v1/harness/records`.

Why the chat endpoint is a raw ASGI callable inside Starlette's router: it must check
`Content-Length` before reading a byte of the body, watch for the client going away
while the model runs (and cancel through the abort callback), and choose between a JSON
error status and an SSE stream only once it knows whether generation started.
Generation runs on one thread (one llama.cpp context); a bounded count of requests may
wait for it, beyond which the answer is 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import llama_cpp
import structlog
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from guest.worker.api_models import (
    MESSAGE_ROLES,
    ChatRequest,
    NamedToolChoice,
    stop_strings,
    template_messages,
)
from guest.worker.engine import Engine, Job, JobResult
from guest.worker.errors import HttpErrorCode, error_body
from guest.worker.records import RecordLog
from guest.worker.schema_grammar import Limits
from guest.worker.toolgrammar import Mode, ToolSpec
from guest.worker.toolprep import ToolLimits, ToolPreparer, ToolRequest, ToolsRefused
from receipts.records.worker import RequestOutcome, WorkerErrorCode, WorkerRequestRecord
from receipts.strictjson import StrictJsonError, StrictJsonKind, loads_strict

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 8 << 20
MAX_CONTAINERS = 1 << 16
MAX_COMMAS = 1 << 20
"""Upper bounds on `{`+`[` and on `,` in a body, counted on the raw bytes (string
contents included, so they over-count) before it is parsed. Why: the JSON parser holds
the GIL while it builds objects (measured 0.2-0.4 s for 8 MB of `[0,0,...]`, and
collections over 600,000 parsed objects stalled `/health` for 1.4 s). No body that fits
a context this worker serves comes near either bound (65,536 braces or brackets, a
million commas); `bytes.count` takes a few ms on 8 MB."""
_BODY_UNREAD: frozenset[WorkerErrorCode] = frozenset(
    {
        "shutting_down",
        "content_length_required",
        "invalid_content_length",
        "body_too_large",
        "queue_full",
        "request_timeout",
        "client_disconnected",
    }
)
"""Refusals sent before the body was read to its end (the response closes the connection)."""
JSON_HEADERS = [(b"content-type", b"application/json")]
log = structlog.get_logger("guest.worker")


@dataclass(frozen=True)
class ApiConfig:
    model_id: str
    deadline_s: float
    queue_depth: int
    limits: Limits
    tool_limits: ToolLimits = field(default_factory=ToolLimits)
    body_timeout_s: float = 30.0
    """From the end of the headers to the last byte of the body (docs/worker-limits.md)."""
    close_connections: bool = False
    """Answer every response with `connection: close`: for a client that reuses a pooled
    connection the worker closed while it was idle (OpenCode's Bun fetch, over the
    guestfwd relay under TCG, where its think time passes the keep-alive: measured as
    `Malformed_HTTP_Response` on its fourth request) and does not retry a POST."""
    tools_required: bool = False
    """Serve `auto` (or no choice) as `required` when tools are offered: the profile's
    `model_tool_required` policy for a client that cannot ask for it itself (an agent
    CLI asks `auto`). Not where the last message is the assistant's: a client that
    prefills the answer asks for text there (OpenCode's last step does)."""


_BODY_ERROR: dict[StrictJsonKind, WorkerErrorCode] = {
    "invalid_json": "invalid_json",
    "duplicate_key": "duplicate_key",
    "non_finite_number": "non_finite_number",
}


class Rejected(Exception):
    """A request refused at the edge: status, stable code and the offending parameter."""

    def __init__(self, status: int, code: WorkerErrorCode, param: str | None = None) -> None:
        super().__init__(code)
        self.status, self.code, self.param = status, code, param
        self.stream = False
        """Whether the request asked to stream (known once its body is parsed)."""


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A `\\uD800`-`\\uDFFF` escape: the only way a surrogate gets into parsed JSON (the
body is strict UTF-8). Pairs are fine; only when one appears is the tree walked."""


def lone_surrogate(obj: Any) -> tuple[str, ...] | None:
    """Where a string holding a lone surrogate is (`messages.3`, `tools`...), or None.

    Such a string cannot be encoded as UTF-8 for the tokenizer; found at the edge it is
    a 400, not a 500 from deep inside generation. The location names only request
    fields and indexes, never a key the client chose.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(obj, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(item, dict):
            for key, value in item.items():
                known = not path and key in ChatRequest.model_fields
                stack.append((key, path))
                stack.append((value, (*path, key) if known else path))
        elif isinstance(item, list):
            top = path in (("messages",), ("tools",))
            stack.extend((v, (*path, str(i)) if top else path) for i, v in enumerate(item))
    return None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a body is parsed (on the prep thread).

    Why: parsing creates one object per JSON value, and the collections those
    allocations trigger hold the GIL, so the event loop stalled for as long as a
    collection ran: measured up to 1.4 s of `/health` latency while an 8 MB body of
    600,000 objects was parsed, 22 ms with the collector off (JSON values form no
    cycles; reference counting frees them as before).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_body(body: bytes) -> ChatRequest:
    """Strict JSON (`receipts.strictjson`: no duplicate keys, no NaN/Infinity, no
    overflowing floats) into `ChatRequest`, or `Rejected`."""
    if body.count(b"{") + body.count(b"[") > MAX_CONTAINERS or body.count(b",") > MAX_COMMAS:
        raise Rejected(400, "request_too_complex")
    try:
        with _collector_paused():
            obj = loads_strict(body)
    except StrictJsonError as exc:
        param = None if exc.key is None else exc.key[:64]  # set only for duplicate_key
        raise Rejected(400, _BODY_ERROR[exc.kind], param) from exc
    if not isinstance(obj, dict):
        raise Rejected(400, "invalid_request")
    if _SURROGATE_ESCAPE.search(body):
        where = lone_surrogate(obj)
        if where is not None:
            raise Rejected(400, "invalid_request", ".".join(where) or None)
    try:
        return ChatRequest.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"] if not _union_tag(str(p))]
        param = ".".join(p for p in loc if p not in MESSAGE_ROLES)
        raise Rejected(400, "invalid_request", param[:128] or None) from exc


def _union_tag(part: str) -> bool:
    """A location part pydantic adds for a union member, not a field of the request
    (`tool_choice: 5` was `tool_choice.literal['none','auto','required']`)."""
    prefixes = ("function-", "union[", "list[", "literal[")
    return part.startswith(prefixes) or part in ("str", "constrained-str")


def _content_length(scope: Scope) -> int:
    values = [v for k, v in scope["headers"] if k == b"content-length"]
    chunked = any(k == b"transfer-encoding" for k, _ in scope["headers"])
    if not values or chunked:
        raise Rejected(400, "content_length_required")
    if len(set(values)) != 1 or not values[0].isdigit() or len(values[0]) > 18:
        raise Rejected(400, "invalid_content_length")
    length = int(values[0])
    if length > MAX_BODY_BYTES:
        raise Rejected(413, "body_too_large")
    return length


async def _read_body(receive: Receive, length: int, timeout_s: float) -> bytes:
    """The body, at most *length* bytes, all of it within *timeout_s* (a slow upload
    holds a queue slot and up to `MAX_BODY_BYTES` of memory: both are bounded in time)."""
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            message = await asyncio.wait_for(receive(), deadline - time.monotonic())
        except TimeoutError:
            raise Rejected(408, "request_timeout") from None
        if message["type"] == "http.disconnect":
            raise Rejected(400, "client_disconnected")
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > length or total > MAX_BODY_BYTES:
            raise Rejected(413, "body_too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _rejection(rej: Rejected) -> JobResult:
    outcome: RequestOutcome = "rejected_invalid_request"
    if rej.code == "queue_full":
        outcome = "refused_queue_full"
    elif rej.code == "shutting_down":
        outcome = "cancelled_shutdown"
    elif rej.code == "constraint_unavailable":
        outcome = "error"
    return JobResult(outcome, rej.status, rej.code)


@dataclass(frozen=True)
class _Prepared:
    job: Job
    stream: bool
    include_usage: bool


class ChatEndpoint:
    """`POST /v1/chat/completions` as an ASGI app.

    Admission order: shutdown, framing, then a queue slot is taken before a
    byte of the body is read, so at most `1 + queue_depth` bodies are buffered and at
    most that many requests are parsed and compiled at once; parsing and tool
    compilation run on the `worker-prep` thread, never on the event loop (`/health`
    answers while they run). Every path, including an unexpected exception, ends in
    one record for the request's index and a JSON body.
    """

    def __init__(self, engine: Engine, config: ApiConfig, records: RecordLog) -> None:
        self.engine = engine
        self.config = config
        self.records = records
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-gen")
        self.prep = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-prep")
        self.tools = ToolPreparer(
            engine.factory, config.limits, config.tool_limits, engine.vocab.special_tags
        )
        self.pending = 0
        self.closing = False
        self.jobs: set[Job] = set()

    # -- shutdown ---------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop admitting; cancel the running and queued jobs (abort callback)."""
        self.closing = True
        for job in list(self.jobs):
            job.cancel.set("shutdown")
        self.engine.cancel_active("shutdown")

    # -- request ---------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        received = time.monotonic()
        index = self.records.allocate()
        sent = _SentTracker(send)
        stream = False
        reserved = recorded = False
        try:
            try:
                length = self._admission(scope)
                self.pending += 1
                reserved = True
                body = await _read_body(receive, length, self.config.body_timeout_s)
                loop = asyncio.get_running_loop()
                prepared = await loop.run_in_executor(self.prep, self._prepare, body, received)
            except Rejected as rej:
                self._record(index, _rejection(rej), rej.stream, received)
                recorded = True
                # Answered before the body was read to its end: the connection is closed.
                body = error_body(rej.status, rej.code, rej.param)
                await _send_json(sent, rej.status, body, close=rej.code in _BODY_UNREAD)
                return
            stream = prepared.stream
            result = await self._serve(prepared, index, receive, sent)
            self._record(index, result, stream, received)
            recorded = True
        except asyncio.CancelledError:
            if not recorded:
                cancelled = JobResult("cancelled_shutdown", 503, "shutting_down")
                self._record(index, cancelled, stream, received)
            raise
        except Exception:
            log.exception("worker.internal_error")
            if not recorded:
                self._record(index, JobResult("error", 500, "internal_error"), stream, received)
            if not sent.started:
                await _send_json(sent, 500, error_body(500, "internal_error"), close=True)
        finally:
            if reserved:
                self.pending -= 1

    def _admission(self, scope: Scope) -> int:
        """Shutdown, framing and the queue, before any body byte is read: the length."""
        if self.closing:
            raise Rejected(503, "shutting_down")
        length = _content_length(scope)
        if self.pending >= 1 + self.config.queue_depth:
            raise Rejected(429, "queue_full")
        return length

    async def _serve(
        self, prepared: _Prepared, index: int, receive: Receive, send: Send
    ) -> JobResult:
        job = prepared.job
        self.jobs.add(job)
        try:
            if prepared.stream:
                return await self._stream(job, index, receive, send, prepared.include_usage)
            result = await self._run(job, receive)
            await self._respond(send, index, result)
            return result
        finally:
            self.jobs.discard(job)

    def _prepare(self, body: bytes, received: float) -> _Prepared:
        """Parse and check the body, prepare its tools (on the `worker-prep` thread)."""
        request = parse_body(body)
        stream = bool(request.stream)
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        try:
            return _Prepared(self._job(request, received), stream, include_usage)
        except Rejected as rej:
            rej.stream = stream
            raise

    def _job(self, request: ChatRequest, received: float) -> Job:
        if request.model != self.config.model_id:
            raise Rejected(404, "model_not_found", "model")
        tools = request.tools or []
        names = [t.function.name for t in tools]
        if len(set(names)) != len(names):
            raise Rejected(400, "invalid_request", "tools")
        choice = request.tool_choice
        mode: Mode
        if isinstance(choice, NamedToolChoice):
            if choice.function.name not in names:
                raise Rejected(400, "invalid_request", "tool_choice")
            mode = "required"
            selected = frozenset({choice.function.name})
        else:
            mode = choice or "auto"
            selected = frozenset(names)
            prefill = request.messages[-1].role == "assistant"
            if mode == "auto" and tools and self.config.tools_required and not prefill:
                mode = "required"
        if mode == "required" and not tools:
            raise Rejected(400, "invalid_request", "tool_choice")
        bias: dict[int, float] = {}
        for key, value in (request.logit_bias or {}).items():
            if not key.isdigit() or int(key) >= self.engine.vocab.n_vocab:
                raise Rejected(400, "invalid_request", "logit_bias")
            bias[int(key)] = value
        specs = tuple(ToolSpec(t.function.name, t.function.parameters) for t in tools)
        try:
            prepared = self.tools.prepare(ToolRequest(specs, selected, mode))
        except ToolsRefused as exc:
            status = 500 if exc.code == "constraint_unavailable" else 400
            raise Rejected(status, exc.code, exc.param) from exc
        return Job(
            messages=template_messages(request),
            tools=[t.model_dump(exclude_none=True) for t in tools] or None,
            grammars=prepared.grammars,
            validators=prepared.validators,
            max_tokens=request.max_completion_tokens or request.max_tokens,
            temperature=1.0 if request.temperature is None else request.temperature,
            top_p=1.0 if request.top_p is None else request.top_p,
            seed=request.seed,
            logit_bias=bias,
            deadline=received + self.config.deadline_s,
            received=received,
            stop=stop_strings(request),
            max_string_chars=self.config.limits.max_string_chars,
            max_array_items=self.config.limits.max_array_items,
            max_text_chars=self.config.limits.max_text_chars,
        )

    def _execute(self, job: Job) -> JobResult:
        """Run on the generation thread; an unexpected failure is a 500, never a hang."""
        try:
            return self.engine.run(job)
        except Exception:
            log.exception("worker.internal_error")
            return JobResult("error", 500, "internal_error")

    async def _run(self, job: Job, receive: Receive) -> JobResult:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, self._execute, job)
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        pair: set[asyncio.Future[Any]] = {future, watcher}
        try:
            done, _ = await asyncio.wait(pair, return_when=asyncio.FIRST_COMPLETED)
            if watcher in done and not future.done():
                job.cancel.set("client")
            return await future
        finally:
            watcher.cancel()

    # -- responses -------------------------------------------------------------

    def _ids(self) -> tuple[str, str]:
        """Random ids (128 bits each): unique across requests and across restarts, where
        a counter would repeat and a client could confuse two answers' tool calls."""
        return "chatcmpl-" + secrets.token_hex(16), "call_" + secrets.token_hex(16)

    @property
    def fingerprint(self) -> str:
        """`system_fingerprint`: the GGUF's digest and the inference build, so a client
        can tell when either changed."""
        return f"fp_{self.engine.model.sha256[:16]}_llama-cpp-python-{llama_cpp.__version__}"

    def _usage(self, result: JobResult) -> dict[str, int]:
        return {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        }

    async def _respond(self, send: Send, index: int, result: JobResult) -> None:
        if result.http_status != 200:
            code = result.error_code or "internal_error"
            await _send_json(
                send, result.http_status, error_body(result.http_status, code, result.error_param)
            )
            return
        completion, call_id = self._ids()
        message: dict[str, Any] = {"role": "assistant", "content": result.text, "refusal": None}
        if result.call is not None:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": result.call.name, "arguments": result.call.arguments_json},
                }
            ]
        body = {
            "id": completion,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.config.model_id,
            "system_fingerprint": self.fingerprint,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": result.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": self._usage(result),
        }
        await _send_json(send, 200, json.dumps(body, ensure_ascii=False).encode("utf-8"))

    async def _stream(
        self, job: Job, index: int, receive: Receive, send: Send, include_usage: bool
    ) -> JobResult:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | JobResult] = asyncio.Queue()

        def on_text(text: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, text)

        job.on_text = on_text
        future = loop.run_in_executor(self.executor, self._execute, job)
        future.add_done_callback(lambda f: queue.put_nowait(f.result()))
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        completion, call_id = self._ids()
        sse = _Sse(send, completion, self.config.model_id, self.fingerprint)
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                pair: set[asyncio.Future[Any]] = {getter, watcher}
                done, _ = await asyncio.wait(pair, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    job.cancel.set("client")
                    return await future
                item = getter.result()
                if isinstance(item, JobResult):
                    break
                await sse.event({"content": item}, None)
            result = item
            if result.http_status != 200 and not sse.started:
                code = result.error_code or "internal_error"
                body = error_body(result.http_status, code, result.error_param)
                await _send_json(send, result.http_status, body)
                return result
            await sse.finish(result, call_id, self._usage(result) if include_usage else None)
        except OSError:
            job.cancel.set("client")
            return await future
        finally:
            watcher.cancel()
        return result

    def _record(self, index: int, result: JobResult, stream: bool, received: float) -> None:
        record = self.records.add(
            WorkerRequestRecord(
                index=index,
                admission=result.admission,
                headroom_bytes=result.headroom_bytes,
                need_bytes=result.need_bytes,
                floor_bytes=self.engine.config.request_floor_bytes,
                guard_bytes=self.engine.config.runtime_guard_bytes,
                deciding_scope=result.deciding_scope,
                outcome=result.outcome,
                error_code=result.error_code,
                http_status=result.http_status,
                stream=stream,
                tools_rendering=result.tools_rendering,
                constraint_backend=result.constraint_backend,
                prompt_tokens=result.prompt_tokens,
                cached_prompt_tokens=result.cached_prompt_tokens,
                completion_tokens=result.completion_tokens,
                time_to_first_token_ms=result.time_to_first_token_ms,
                decode_ms=result.decode_ms,
                min_headroom_bytes=result.min_headroom_bytes,
                duration_ms=int((time.monotonic() - received) * 1000),
                cut=result.cut,
            )
        )
        log.info(
            "worker.request",
            index=record.index,
            outcome=record.outcome,
            status=record.http_status,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            duration_ms=record.duration_ms,
        )


CUT_FINISH_REASON: Final = {"deadline_exceeded": "length"}
"""The `finish_reason` of a stream that an error cut after it started: `length` when the
request's time budget ran out, `error` for anything else. Clients need one on every
stream (OpenCode re-sends a stream that ends without one); the error event before it
says what happened."""


class _Sse:
    """Server-sent events in the OpenAI chunk format; headers go out with the first event.

    Every chunk carries `usage`: null, except the usage chunk itself (sent last, before
    `[DONE]`, when the request asked for it), as OpenAI's streams do.
    """

    def __init__(self, send: Send, completion: str, model: str, fingerprint: str) -> None:
        self._send = send
        self._completion = completion
        self._model = model
        self._fingerprint = fingerprint
        self._created = int(time.time())
        self.started = False

    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": self._completion,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": self._fingerprint,
            "choices": choices,
            "usage": usage,
        }
        return b"data: " + json.dumps(body, ensure_ascii=False).encode("utf-8") + b"\n\n"

    async def _start(self) -> None:
        if self.started:
            return
        self.started = True
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        await self.event({"role": "assistant", "content": ""}, None)

    async def event(self, delta: dict[str, Any], finish: str | None) -> None:
        await self._start()
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        await _send_body(self._send, self._chunk([choice]), more=True)

    async def finish(self, result: JobResult, call_id: str, usage: dict[str, int] | None) -> None:
        """The closing events: the call (if any), the finish reason, an error event when
        an error cut the stream, usage when asked, then `[DONE]`: always in that order."""
        await self._start()
        if result.http_status != 200:
            code = result.error_code or "internal_error"
            await self.event({}, CUT_FINISH_REASON.get(code, "error"))
            error = error_body(result.http_status, code)
            await _send_body(self._send, b"data: " + error + b"\n\n", more=True)
        else:
            if result.call is not None:
                function = {"name": result.call.name, "arguments": result.call.arguments_json}
                call = {"index": 0, "id": call_id, "type": "function", "function": function}
                await self.event({"tool_calls": [call]}, None)
            await self.event({}, result.finish_reason)
        if usage is not None:
            await _send_body(self._send, self._chunk([], usage), more=True)
        await _send_body(self._send, b"data: [DONE]\n\n", more=False)


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _send_body(send: Send, body: bytes, more: bool) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def _send_json(send: Send, status: int, body: bytes, close: bool = False) -> None:
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await _send_body(send, body, more=False)


class _SentTracker:
    """The ASGI `send`, remembering whether a response has started (so the catch-all
    knows whether a JSON 500 can still be sent)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def _json(status: int, body: bytes) -> Response:
    return Response(body, status_code=status, media_type="application/json")


def closing(app: ASGIApp) -> ASGIApp:
    """`app` with `connection: close` on every response it starts."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await app(scope, receive, send_closing)

    return wrapped


def build_app(chat: ChatEndpoint) -> ASGIApp:
    """The Starlette app: the chat endpoint plus the small GET endpoints (every response
    closing its connection when the config says so)."""
    config = chat.config
    app = _routes(chat, config)
    return closing(app) if config.close_connections else app


def _routes(chat: ChatEndpoint, config: ApiConfig) -> Starlette:
    async def models(_request: Request) -> Response:
        data = {
            "object": "list",
            "data": [
                {"id": config.model_id, "object": "model", "created": 0, "owned_by": "harness"}
            ],
        }
        return _json(200, json.dumps(data).encode())

    async def health(_request: Request) -> Response:
        if chat.closing:
            return _json(503, error_body(503, "shutting_down"))
        return _json(200, b'{"status":"ok"}')

    async def records(_request: Request) -> Response:
        return _json(200, chat.records.document())

    async def http_error(_request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code: HttpErrorCode = {404: "not_found", 405: "method_not_allowed"}.get(
            status, "internal_error"
        )  # type: ignore[assignment]
        return _json(status, error_body(status, code))

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/harness/records", records, methods=["GET"]),
        ],
        # `Exception`: Starlette's last-resort handler, JSON instead of its text/plain 500.
        exception_handlers={HTTPException: http_error, Exception: http_error},
    )
