"""Constraint backends: llguidance (default) and llama.cpp GBNF (validated fallback).

Both take the same grammar IR and act as a logits mask: `mask(logits)` sets every
disallowed token to -inf, `allows(token)` checks one token without a mask (the engine
tries the sampled token first and masks only when it is refused), `accept(token)`
advances the state. llguidance's tokenizer is
built once per model (0.2-0.9 s) and a compiled matcher is cached per grammar text and
deep-copied per request. A GBNF is validated with `llama_sampler_init_grammar` before
use (NULL means invalid; an invalid GBNF otherwise segfaults during generation).
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections import OrderedDict
from typing import Final, Literal, Protocol

import llama_cpp
import llguidance
import llguidance.llamacpp
import llguidance.numpy
import numpy as np
import numpy.typing as npt

from guest.worker.grammar import Grammar
from guest.worker.toolgrammar import CALL_OPEN

BackendName = Literal["llguidance", "gbnf"]


TEXT_SLICES: Final = tuple(
    f"[^{re.escape(CALL_OPEN[0])}]{bound}" for bound in ("{1,10}", "{1,30}", "+")
)
"""llguidance "slices" for the free-text alternative: tokens without a `<`.

Why: the text answer is one bounded lexeme (`text_without` in toolgrammar.py), and its
bound makes every character position a new lexer state, so without a slice llguidance
walks the whole token trie for every token: measured 3.1-7.4 ms per token at a
152k vocabulary, against 0.2 ms with these slices. A slice is a token subset whose
mask llguidance precomputes and uses only where the lexer state admits all of it (it
never changes which tokens are allowed; test_units checks masks with and without).
The default slices cover JSON strings, which is why tool-call arguments were cheap.
"""


class ConstraintUnavailable(Exception):
    """The grammar could not be compiled or validated by the chosen backend."""


class Constraint(Protocol):
    backend: BackendName
    check_first: bool
    """Checking one sampled token is much cheaper than a full mask (see GbnfConstraint)."""

    def mask(self, logits: npt.NDArray[np.float32]) -> None: ...

    def allows(self, token: int) -> bool: ...

    def accept(self, token: int) -> bool: ...

    def finished(self) -> bool: ...

    def close(self) -> None: ...


class LlguidanceConstraint:
    backend: BackendName = "llguidance"
    check_first = True  # `validate_tokens` on one token skips the mask (~0.2-2 ms at 152k)

    def __init__(self, matcher: llguidance.LLMatcher, n_vocab: int) -> None:
        self._matcher = matcher
        self._n_vocab = n_vocab
        self._bitmask = llguidance.numpy.allocate_token_bitmask(1, n_vocab)

    def mask(self, logits: npt.NDArray[np.float32]) -> None:
        llguidance.numpy.fill_next_token_bitmask(self._matcher, self._bitmask)
        bits = np.unpackbits(self._bitmask.view(np.uint8), count=self._n_vocab, bitorder="little")
        logits[~bits.view(np.bool_)] = -np.inf

    def allows(self, token: int) -> bool:
        return bool(self._matcher.validate_tokens([token]) == 1)

    def accept(self, token: int) -> bool:
        return bool(self._matcher.consume_token(token)) and not self._matcher.is_error()

    def finished(self) -> bool:
        return bool(self._matcher.is_stopped())

    def close(self) -> None:
        return None


_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


class GbnfConstraint:
    """llama.cpp's grammar sampler as a mask.

    Why `check_first`: a full mask runs llama.cpp's grammar over every candidate (each
    token's text decoded and matched against every parse stack), measured ~1.1 s per
    token at a 152k vocabulary with the tool grammar. Checking only the token the
    sampler picked costs one candidate; the full mask is computed only when that token
    is refused. This is what llama.cpp's own common sampler does, and it picks from the
    same distribution (see Engine._pick).
    """

    backend: BackendName = "gbnf"
    check_first = True

    def __init__(self, sampler: llama_cpp.llama_sampler_p, n_vocab: int) -> None:
        self._sampler: llama_cpp.llama_sampler_p | None = sampler
        self._data = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._data["id"] = np.arange(n_vocab, dtype=np.intc)
        self._array = llama_cpp.llama_token_data_array(
            data=self._data.ctypes.data_as(llama_cpp.llama_token_data_p),
            size=n_vocab,
            selected=-1,
            sorted=False,
        )
        self._one = np.zeros(1, dtype=_TOKEN_DATA)
        self._one_array = llama_cpp.llama_token_data_array(
            data=self._one.ctypes.data_as(llama_cpp.llama_token_data_p),
            size=1,
            selected=-1,
            sorted=False,
        )

    def allows(self, token: int) -> bool:
        """The grammar sampler applied to a single candidate (it only ever lowers logits)."""
        self._one[0] = (token, 0.0, 0.0)
        self._one_array.size, self._one_array.selected = 1, -1
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(self._one_array))
        return bool(np.isfinite(self._one["logit"][0]))

    def mask(self, logits: npt.NDArray[np.float32]) -> None:
        self._data["logit"] = logits
        self._array.size = len(self._data)
        self._array.selected = -1
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(self._array))
        # The grammar sampler only ever lowers logits to -inf, in place.
        rejected = np.isneginf(self._data["logit"])
        logits[rejected] = -np.inf

    def accept(self, token: int) -> bool:
        llama_cpp.llama_sampler_accept(self._sampler, token)
        return True

    def finished(self) -> bool:
        return False

    def close(self) -> None:
        if self._sampler is not None:
            llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None


def validate_gbnf(vocab: llama_cpp.llama_vocab_p, gbnf: str) -> llama_cpp.llama_sampler_p:
    """A grammar sampler for *gbnf*, or `ConstraintUnavailable` if llama.cpp refuses it."""
    sampler: llama_cpp.llama_sampler_p = llama_cpp.llama_sampler_init_grammar(
        vocab, gbnf.encode("utf-8"), b"root"
    )
    if not sampler:
        raise ConstraintUnavailable("gbnf")
    return sampler


class ConstraintFactory:
    """Per-model cache of the llguidance tokenizer and of compiled matchers.

    `prepare` builds a request's matcher on the compile thread (llguidance drops the
    GIL while it builds: measured worst ticker gap 6 ms during a 1.8 s build) and
    `create`, on the generation thread, finds it in the cache. The cache holds at least
    `min_entries` matchers, which the server sets above the number of requests that can
    be admitted at once, so a prepared matcher is still there when its request runs
    (a miss would only build it again, within the same llguidance limits).
    """

    CACHE_SIZE = 4
    """Matchers kept beyond `min_entries`. Small on purpose: a compiled matcher of a
    schema near the compile budget holds about 9 MB (measured: 32 cached matchers of
    distinct 500-property schemas added 297 MiB of RSS), and an agent reuses a few
    grammars (one tool list, a few `tool_choice` modes)."""

    def __init__(
        self,
        vocab: llama_cpp.llama_vocab_p,
        n_vocab: int,
        backend: BackendName,
        min_entries: int = 0,
    ) -> None:
        self._vocab = vocab
        self._n_vocab = n_vocab
        self.backend: BackendName = backend
        self._tokenizer: llguidance.LLTokenizer | None = None
        self._matchers: OrderedDict[str, llguidance.LLMatcher] = OrderedDict()
        self._size = min_entries + self.CACHE_SIZE
        self._lock = threading.Lock()

    def tokenizer(self) -> llguidance.LLTokenizer:
        with self._lock:
            if self._tokenizer is None:
                slices = llguidance.LLTokenizer.general_slices() + list(TEXT_SLICES)
                self._tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(
                    self._vocab, slices=slices
                )
            return self._tokenizer

    def _compiled(self, lark: str) -> llguidance.LLMatcher:
        """The cached matcher for *lark*, built once (no separate validation pass: a
        grammar llguidance refuses leaves the matcher in its error state)."""
        tokenizer = self.tokenizer()
        with self._lock:
            cached = self._matchers.get(lark)
            if cached is not None:
                self._matchers.move_to_end(lark)
                return cached
        grammar = llguidance.LLMatcher.grammar_from_lark(lark)
        matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ConstraintUnavailable("llguidance")
        with self._lock:
            self._matchers[lark] = matcher
            while len(self._matchers) > self._size:
                self._matchers.popitem(last=False)
        return matcher

    def prepare(self, grammar_special: Grammar, grammar_plain: Grammar) -> None:
        """Everything `create` needs that does not depend on the request's turn: the
        rendering and, for llguidance, the compiled matcher. Runs off the event loop.
        A GBNF is only rendered here; llama.cpp parses it once, in `create`."""
        if self.backend == "llguidance":
            self._compiled(grammar_special.to_lark())
        else:
            grammar_plain.to_gbnf()

    def create(self, grammar_special: Grammar, grammar_plain: Grammar) -> Constraint:
        """A fresh constraint; llguidance gets the special-token form, GBNF the plain one."""
        if self.backend == "llguidance":
            matcher = self._compiled(grammar_special.to_lark()).deep_copy()
            return LlguidanceConstraint(matcher, self._n_vocab)
        return GbnfConstraint(validate_gbnf(self._vocab, grammar_plain.to_gbnf()), self._n_vocab)
