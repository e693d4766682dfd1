"""Generation: one request at a time on one llama.cpp context, accounted exactly.

The loop is ours (not `Llama.create_chat_completion`) so that: the constraint masks
logits before sampling; cancellation is llama.cpp's abort callback (it stops even a
long prompt within milliseconds, where a stopping criterion would wait for a token and
report `stop`); `completion_tokens` counts tokens sampled, `finish_reason` says what
actually ended generation; the KV cache keeps the longest common prefix with the last
request (an agent resends its growing conversation).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import llama_cpp
import numpy as np
import numpy.typing as npt
from jsonschema.protocols import Validator

from guest.worker.constraint import Constraint, ConstraintFactory, ConstraintUnavailable
from guest.worker.grammar import Grammar
from guest.worker.guard import ABORT_CALLBACK, Cancel, CancelReason, Watchdog
from guest.worker.loader import LoadedModel
from guest.worker.memory import HeadroomReader, HeadroomUnread
from guest.worker.prompt import PromptRenderer, TemplateError
from guest.worker.textstream import StopStrings, TextStreamer
from guest.worker.toolcall import InvalidModelOutput, ParsedCall, parse_tool_call
from guest.worker.toolgrammar import CALL_CLOSE, CALL_OPEN, text_units
from guest.worker.vocab import VocabInfo, vocab_info
from receipts.records.worker import (
    Admission,
    ConstraintBackend,
    DecidingScope,
    RequestCut,
    RequestOutcome,
    ToolsRendering,
    WorkerErrorCode,
)

SCRATCH_BYTES: Final = 16 << 20
"""Per-request working memory beside the KV cache (logit copies, batch, constraint)."""

FinishReason = Literal["stop", "length", "tool_calls"]

_CANCEL_OUTCOME: Final[dict[CancelReason, tuple[RequestOutcome, WorkerErrorCode, int]]] = {
    "deadline": ("cancelled_deadline", "deadline_exceeded", 504),
    "client": ("cancelled_client", "client_disconnected", 499),
    "shutdown": ("cancelled_shutdown", "shutting_down", 503),
    "memory_pressure": ("cancelled_memory_pressure", "memory_pressure", 503),
}


@dataclass(eq=False)
class Job:
    """One chat completion, already validated at the API edge."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    grammars: tuple[Grammar, Grammar] | None
    """(llguidance form, GBNF form), or None for unconstrained text."""
    validators: dict[str, Validator]
    max_tokens: int | None
    temperature: float
    top_p: float
    seed: int | None
    logit_bias: dict[int, float]
    deadline: float
    received: float
    cancel: Cancel = field(default_factory=Cancel)
    on_text: Callable[[str], None] | None = None
    stop: tuple[str, ...] = ()
    """OpenAI `stop` strings: they end a text answer, never a tool call."""
    max_string_chars: int | None = None
    """The grammar's string cap: a call with a string that long is refused (toolcall.py)."""
    max_array_items: int | None = None
    """The grammar's array cap: a call with an array that long is refused (toolcall.py)."""
    max_text_chars: int | None = None
    """The tool grammar's cap on a text answer, in its units (toolgrammar.text_units): a
    text that reached it was cut there, so it finishes `length`."""


@dataclass
class JobResult:
    outcome: RequestOutcome
    http_status: int
    error_code: WorkerErrorCode | None = None
    error_param: str | None = None
    finish_reason: FinishReason | None = None
    text: str | None = None
    call: ParsedCall | None = None
    admission: Admission = "not_evaluated"
    headroom_bytes: int | None = None
    need_bytes: int = 0
    deciding_scope: DecidingScope | None = None
    min_headroom_bytes: int | None = None
    constraint_backend: ConstraintBackend = "none"
    tools_rendering: ToolsRendering = "not_rendered"
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    time_to_first_token_ms: int | None = None
    decode_ms: int = 0
    cut: RequestCut | None = None


_CAP_REFUSAL: Final[dict[str, tuple[WorkerErrorCode, RequestCut]]] = {
    "string_at_cap": ("tool_argument_too_long", "tool_string_chars"),
    "array_at_cap": ("tool_argument_too_many_items", "tool_array_items"),
}
"""A call refused because the grammar's cap may have cut it: its code and the cap."""


class _Aborted(Exception):
    pass


@dataclass(frozen=True)
class EngineConfig:
    request_floor_bytes: int
    runtime_guard_bytes: int
    default_max_tokens: int


class Engine:
    """Owns the context. Not thread-safe: the server runs jobs on one thread."""

    def __init__(
        self,
        model: LoadedModel,
        config: EngineConfig,
        factory: ConstraintFactory,
        reader: HeadroomReader | None = None,
    ) -> None:
        self.model = model
        self.config = config
        self.factory = factory
        self.reader = reader or HeadroomReader()
        self.vocab: VocabInfo = vocab_info(model.vocab)
        if model.chat_template is None:
            raise TemplateError("no_template")
        self.renderer = PromptRenderer(model.chat_template)
        self._ctx = model.llm._ctx.ctx
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._cached: list[int] = []
        self._logit_buf = np.empty(self.vocab.n_vocab, dtype=np.float32)
        self._logit_addr: int = self._logit_buf.ctypes.data
        self._banned_ids = np.flatnonzero(self.vocab.banned)
        self._active: Cancel | None = None
        self._idle = Cancel()  # never set: the flag the callback reads between requests
        self._watch(self._idle)

    # -- cancellation -----------------------------------------------------------

    def _watch(self, cancel: Cancel) -> None:
        """Point llama.cpp's abort callback at *cancel*'s flag (read in C, see guard.py)."""
        flag = ctypes.cast(cancel.flag, ctypes.c_void_p)
        llama_cpp.llama_set_abort_callback(self._ctx, ABORT_CALLBACK, flag)

    def cancel_active(self, reason: CancelReason) -> None:
        active = self._active
        if active is not None:
            active.set(reason)

    # -- helpers ----------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        return self.model.llm.tokenize(
            text.encode("utf-8"), add_bos=self.model.add_bos, special=True
        )

    def need_bytes(self) -> int:
        """Memory one request adds beyond the loaded model: a float64 copy of the logits
        row (sampling) and scratch. Not the KV cache, whatever the request's length:
        llama.cpp allocates the whole context's cache when the context is created and
        clears it (touching every page), so it is already in the working set that
        admission reads. Counting it again asked a near-full-context request for twice
        its cache: the qwen4b worker measured RssAnon 2.62 GB right after load, of which
        the 16K-token cache is 2.42 GB (docs/qwen4b-memory.md)."""
        return 8 * self.vocab.n_vocab + SCRATCH_BYTES

    def _clear_cache(self) -> None:
        llama_cpp.llama_memory_clear(self._memory, True)
        self._cached = []

    def _decode_failed(self, cancel: Cancel) -> None:
        """After `llama_decode` returned non-zero: raise `_Aborted` or `RuntimeError`.

        An abort (a deadline, a client gone) keeps what was decoded before the batch:
        llama.cpp drops the positions of the batch it aborted, and the positions from
        `len(self._cached)` on are removed again here so the cache holds exactly
        `self._cached`. A retry of the same conversation then reuses that prefix instead
        of prefilling from zero (a 2,400-token prompt retried under a deadline would
        never finish otherwise). Any other failure clears the cache: its state is unknown.
        """
        if cancel and llama_cpp.llama_memory_seq_rm(self._memory, 0, len(self._cached), -1):
            raise _Aborted
        self._clear_cache()
        if cancel:
            raise _Aborted
        raise RuntimeError("decode_failed")

    def _decode(self, tokens: list[int], cancel: Cancel) -> None:
        """Append *tokens* to the context, in batches; `_Aborted` if cancelled."""
        llm = self.model.llm
        n_batch = llm.n_batch
        for start in range(0, len(tokens), n_batch):
            if cancel:
                raise _Aborted
            batch = tokens[start : start + n_batch]
            llm._batch.set_batch(batch=batch, n_past=len(self._cached), logits_all=False)
            if llama_cpp.llama_decode(self._ctx, llm._batch.batch) != 0:
                self._decode_failed(cancel)
            self._cached.extend(batch)

    def _decode_one(self, token: int, cancel: Cancel) -> None:
        """`_decode([token])` without the batching loop: the per-token path of generation.

        Fills the one batch slot directly (`set_batch` loops over ctypes fields in
        Python); the slot's sequence fields are written too, so nothing depends on what
        an earlier batch left there.
        """
        if cancel:
            raise _Aborted
        batch = self.model.llm._batch.batch
        batch.n_tokens = 1
        batch.token[0] = token
        batch.pos[0] = len(self._cached)
        batch.seq_id[0][0] = 0
        batch.n_seq_id[0] = 1
        batch.logits[0] = True
        if llama_cpp.llama_decode(self._ctx, batch) != 0:
            self._decode_failed(cancel)
        self._cached.append(token)

    def _prefill(self, tokens: list[int], cancel: Cancel) -> int:
        """Reuse the common prefix of the KV cache, decode the rest; return tokens reused."""
        keep = 0
        for a, b in zip(self._cached, tokens, strict=False):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)  # the last prompt token is decoded for its logits
        if keep < len(self._cached):
            if not llama_cpp.llama_memory_seq_rm(self._memory, 0, keep, -1):
                self._clear_cache()
                keep = 0
            else:
                self._cached = self._cached[:keep]
        self._decode(tokens[keep:], cancel)
        return keep

    def _logits(self) -> npt.NDArray[np.float32]:
        """The last position's logits, copied into one buffer reused for every token.

        Why a copy: masking writes -inf in place, and llama.cpp's own array must stay
        intact. Why `memmove` into a preallocated buffer: `np.ctypeslib.as_array` builds a
        ctypes array type per call (measured ~10 us, as much as a tiny model's copy).
        """
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, -1)
        if not ptr:
            raise RuntimeError("no_logits")
        ctypes.memmove(self._logit_addr, ptr, self._logit_buf.nbytes)
        return self._logit_buf

    # -- the job ----------------------------------------------------------------

    def run(self, job: Job) -> JobResult:
        """Render, admit, generate, validate. Never raises for anything a request causes."""
        if job.cancel:
            return self._cancelled(JobResult("error", 500), job.cancel)
        try:
            prompt, rendering = self.renderer.render(job.messages, job.tools)
        except TemplateError:
            return JobResult("rejected_invalid_request", 400, "invalid_request", "messages")
        tokens = self.tokenize(prompt)
        result = JobResult("error", 500, prompt_tokens=len(tokens), tools_rendering=rendering)
        room = self.model.n_ctx - len(tokens)
        if room < 1 or (job.max_tokens is not None and job.max_tokens > room):
            result.outcome, result.http_status = "rejected_invalid_request", 400
            result.error_code, result.error_param = "context_length_exceeded", "messages"
            return result
        max_tokens = min(job.max_tokens or self.config.default_max_tokens, room)
        if not self._admit(result):
            return result
        constraint: Constraint | None = None
        if job.grammars is not None:
            try:
                constraint = self.factory.create(*job.grammars)
            except ConstraintUnavailable:
                result.error_code = "constraint_unavailable"
                return result
            result.constraint_backend = constraint.backend
        watchdog = Watchdog(job.cancel, self.reader, self.config.runtime_guard_bytes, job.deadline)
        watchdog.sample()
        watchdog.start()
        self._active = job.cancel
        self._watch(job.cancel)
        try:
            self._generate(job, tokens, max_tokens, constraint, result)
        except _Aborted:
            self._cancelled(result, job.cancel)
        finally:
            self._watch(self._idle)
            self._active = None
            watchdog.stop()
            result.min_headroom_bytes = watchdog.min_headroom
            if constraint is not None:
                constraint.close()
        return result

    def _admit(self, result: JobResult) -> bool:
        need = self.need_bytes()
        result.need_bytes = need
        result.admission = "refused"
        result.outcome, result.http_status = "refused_headroom", 503
        try:
            headroom = self.reader.read()
        except HeadroomUnread:
            result.error_code = "headroom_unread"
            return False
        result.headroom_bytes, result.deciding_scope = headroom.bytes, headroom.scope
        if need + self.config.request_floor_bytes > headroom.bytes:
            result.error_code = "insufficient_memory_headroom"
            return False
        result.admission = "admitted"
        result.outcome, result.http_status = "error", 500
        return True

    def _cancelled(self, result: JobResult, cancel: Cancel) -> JobResult:
        reason = cancel.reason or "shutdown"
        result.outcome, result.error_code, result.http_status = _CANCEL_OUTCOME[reason]
        result.finish_reason, result.text, result.call = None, None, None
        result.cut = None
        return result

    def _sample(self, logits: npt.NDArray[np.float32], job: Job, rng: np.random.Generator) -> int:
        """A token id, or -1 when every token is masked (no finite logit is left)."""
        if job.temperature <= 0.0:
            token = int(logits.argmax())
            return token if np.isfinite(logits[token]) else -1
        top = logits.max()
        if not np.isfinite(top):
            return -1
        scaled = logits.astype(np.float64)
        scaled -= top
        scaled /= job.temperature
        probs = np.exp(scaled)
        if job.top_p < 1.0:
            order = np.argsort(-probs)
            sorted_probs = probs[order]
            cumulative = np.cumsum(sorted_probs)
            cut = int(np.searchsorted(cumulative, job.top_p * cumulative[-1])) + 1
            probs = np.zeros_like(probs)
            probs[order[:cut]] = sorted_probs[:cut]
        cumulative = np.cumsum(probs)
        pick = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
        return min(pick, len(probs) - 1)

    def _bias(
        self, logit_bias: dict[int, float]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(ids, additions): the request's `logit_bias`, and -inf for every banned token."""
        merged = dict(logit_bias)
        merged.update(dict.fromkeys(self._banned_ids.tolist(), -np.inf))
        ids = np.fromiter(merged, dtype=np.int64, count=len(merged))
        return ids, np.fromiter(merged.values(), dtype=np.float32, count=len(merged))

    def _pick(
        self,
        job: Job,
        constraint: Constraint | None,
        rng: np.random.Generator,
        bias: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
    ) -> int:
        """The next token: bans and `logit_bias`, the constraint, then sampling (-1: none left).

        *bias* carries the bans as -inf, so both are one indexed add (logits are finite).
        """
        logits = self._logits()
        logits[bias[0]] += bias[1]
        if constraint is None:
            return self._sample(logits, job, rng)
        if constraint.check_first and (job.temperature <= 0.0 or job.top_p >= 1.0):
            # Sample unconstrained and keep the token if the grammar allows it; else
            # mask and sample again. Greedy: the allowed argmax is the masked argmax.
            # Temperature: P(t) = p(t) + (1 - p(A)) * p(t) / p(A) = p(t) / p(A) for an
            # allowed t, exactly the masked distribution. Not with top_p < 1, whose
            # nucleus depends on the mask: that path masks first.
            token = self._sample(logits, job, rng)
            if token >= 0 and constraint.allows(token):
                return token
        constraint.mask(logits)
        return self._sample(logits, job, rng)

    def _generate(
        self,
        job: Job,
        tokens: list[int],
        max_tokens: int,
        constraint: Constraint | None,
        result: JobResult,
    ) -> None:
        result.cached_prompt_tokens = self._prefill(tokens, job.cancel)
        rng = np.random.default_rng(job.seed if job.seed is None else job.seed % (1 << 64))
        bias = self._bias(job.logit_bias)
        out = bytearray()
        stops = StopStrings(job.stop)
        tagged = constraint is not None
        streamer = TextStreamer(job.on_text, tagged, stops)
        first: float | None = None
        finish: FinishReason | None = None
        eos, pieces = self.vocab.eos, self.vocab.pieces
        call_open, close = CALL_OPEN.encode(), CALL_CLOSE.encode()
        while finish is None:
            if job.cancel:
                raise _Aborted
            token = self._pick(job, constraint, rng, bias)
            if token < 0:
                result.error_code = "internal_error"
                return
            result.completion_tokens += 1
            if first is None:
                first = time.monotonic()
                result.time_to_first_token_ms = int((first - job.received) * 1000)
            if constraint is not None and not constraint.accept(token):
                result.outcome, result.http_status = "invalid_model_output", 502
                result.error_code = "invalid_model_output"
                return
            if token == eos:
                finish = "stop"
                break
            grown_from = len(out)
            out += pieces[token]
            if stops and not (tagged and out.startswith(call_open)):
                cut = stops.find(out, grown_from)
                if cut is not None:
                    del out[cut:]
                    finish = "stop"
                    break
            streamer.feed(out)
            if out.startswith(call_open) and out.endswith(close):
                finish = "tool_calls"
            elif constraint is not None and constraint.finished():
                finish = "stop"
            elif result.completion_tokens >= max_tokens:
                finish = "length"
                result.cut = "max_tokens"
            else:
                self._decode_one(token, job.cancel)
        result.decode_ms = int((time.monotonic() - (first or time.monotonic())) * 1000)
        self._finish(job, out, finish, result)
        if result.finish_reason in ("stop", "length") and result.text is not None:
            streamer.flush(out)

    def _finish(self, job: Job, out: bytearray, finish: FinishReason, result: JobResult) -> None:
        text = out.decode("utf-8", errors="replace")
        if finish == "tool_calls":
            try:
                result.call = parse_tool_call(
                    text, job.validators, job.max_string_chars, job.max_array_items
                )
            except InvalidModelOutput as exc:
                result.outcome, result.http_status = "invalid_model_output", 502
                result.error_code, result.cut = _CAP_REFUSAL.get(
                    exc.reason, ("invalid_model_output", None)
                )
                return
            result.outcome, result.http_status, result.finish_reason = "tool_calls", 200, finish
            return
        if job.grammars is not None and text.startswith(CALL_OPEN):
            # A call cut by max_tokens: not valid text and not a valid call.
            result.cut = "max_tokens"
            result.outcome, result.http_status, result.finish_reason = "length", 200, "length"
            result.text = None
            return
        if (
            job.tools is not None
            and job.grammars is not None  # only a tool grammar caps a text answer
            and job.max_text_chars is not None
            and text_units(text) >= job.max_text_chars
        ):
            finish, result.cut = "length", "text_chars"
        result.outcome, result.http_status, result.finish_reason = finish, 200, finish
        result.text = text
