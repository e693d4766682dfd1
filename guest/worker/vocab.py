"""Facts about the model's vocabulary that sampling and the constraint depend on.

Why a static ban: control tokens other than the end-of-turn token (`<|im_start|>`,
`<|endoftext|>`, ...) are never a valid part of an answer. llguidance refuses them by
itself (they are marked special), llama.cpp's GBNF matches them by their spelling; the
ban makes both backends, and unconstrained text, admit the same tokens.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import llama_cpp
import numpy as np
import numpy.typing as npt

from guest.worker.toolgrammar import CALL_CLOSE, CALL_OPEN


@dataclass(frozen=True)
class VocabInfo:
    n_vocab: int
    eos: int
    """The end-of-turn token generation stops on (`<|im_end|>` for Qwen)."""
    banned: npt.NDArray[np.bool_]
    """True for tokens never sampled: control tokens other than `eos`."""
    special_tags: bool
    """`<tool_call>` and `</tool_call>` are single tokens llguidance treats as special."""
    pieces: tuple[bytes, ...]
    """Each token's bytes as it appears in output (special tokens spelled out)."""


def _piece(
    vocab: llama_cpp.llama_vocab_p, token: int, buffer: ctypes.Array[ctypes.c_char]
) -> bytes:
    n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
    if n < 0:
        raise ValueError("token piece too long")
    return buffer.raw[:n]


def _single_special(vocab: llama_cpp.llama_vocab_p, pieces: tuple[bytes, ...], text: str) -> bool:
    matches = [i for i, p in enumerate(pieces) if p == text.encode()]
    if not matches:
        return False
    attr = llama_cpp.llama_token_get_attr(vocab, matches[0])
    return bool(
        attr & (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED)
    )


def vocab_info(vocab: llama_cpp.llama_vocab_p) -> VocabInfo:
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    eos = llama_cpp.llama_vocab_eos(vocab)
    buffer = ctypes.create_string_buffer(16 * 1024)
    pieces = tuple(_piece(vocab, t, buffer) for t in range(n))
    banned = np.zeros(n, dtype=np.bool_)
    for token in range(n):
        attr = llama_cpp.llama_token_get_attr(vocab, token)
        if token != eos and attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL:
            banned[token] = True
        if not pieces[token] and token != eos:
            banned[token] = True
    special = _single_special(vocab, pieces, CALL_OPEN) and _single_special(
        vocab, pieces, CALL_CLOSE
    )
    return VocabInfo(n, eos, banned, special, pieces)
