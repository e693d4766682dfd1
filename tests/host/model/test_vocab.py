"""Reading tokenizer.json in llama.cpp's terms: each refusal on a minimally damaged copy."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from host.model.categories import ConvertError
from host.model.vocab import (
    TOKEN_CONTROL,
    TOKEN_USER_DEFINED,
    detect_pre,
    read_vocab,
    resolve_special,
)

Edit = Callable[[dict[str, Any]], object]


@pytest.fixture(scope="module")
def tokenizer(tiny_dir: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((tiny_dir / "tokenizer.json").read_text())
    return value


def _refused(tokenizer: dict[str, Any], edit: Edit, size: int = 1024) -> str:
    damaged = copy.deepcopy(tokenizer)
    edit(damaged)
    with pytest.raises(ConvertError) as info:
        read_vocab(damaged, size)
    return info.value.category


def _set(path: tuple[str | int, ...], value: Any) -> Edit:
    def edit(t: dict[str, Any]) -> None:
        node: Any = t
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def test_tiny_vocab_reads(tokenizer: dict[str, Any]) -> None:
    vocab = read_vocab(tokenizer, 1024)
    assert vocab.pre == "qwen2"
    assert len(vocab.tokens) == len(vocab.token_types) == 1024
    assert vocab.token_types[1019:] == [TOKEN_CONTROL] * 3 + [TOKEN_USER_DEFINED] * 2
    assert detect_pre(tokenizer) == "qwen2"


@pytest.mark.parametrize(
    ("edit", "category"),
    [
        (_set(("pre_tokenizer",), None), "unknown_pretokenizer"),
        (_set(("pre_tokenizer", "type"), "ByteLevel"), "unknown_pretokenizer"),
        (_set(("pre_tokenizer", "pretokenizers", 0), "Split"), "unknown_pretokenizer"),
        (
            _set(("pre_tokenizer", "pretokenizers", 0, "behavior"), "Removed"),
            "unknown_pretokenizer",
        ),
        (_set(("pre_tokenizer", "pretokenizers", 1, "use_regex"), True), "unknown_pretokenizer"),
        (_set(("normalizer",), {"normalizers": []}), "unknown_pretokenizer"),
        (_set(("model", "merges"), [["a b", "c"]]), "unsupported_tokenizer"),
        (_set(("model", "merges"), [1]), "unsupported_tokenizer"),
        (_set(("model", "merges"), None), "unsupported_tokenizer"),
        (_set(("model", "type"), "WordPiece"), "unsupported_tokenizer"),
        (_set(("model", "vocab", "Ġthe"), "7"), "unsupported_tokenizer"),
        (_set(("added_tokens",), 5), "unsupported_tokenizer"),
        (_set(("added_tokens", 0), "<|endoftext|>"), "unsupported_tokenizer"),
        (_set(("added_tokens", 0, "id"), "1019"), "unsupported_tokenizer"),
        (_set(("added_tokens", 0, "id"), 0), "unsupported_tokenizer"),
    ],
    ids=[
        "no-pre",
        "pre-not-sequence",
        "part-not-object",
        "split-behaviour",
        "bytelevel-regex",
        "normalizer-untyped",
        "merge-with-space",
        "merge-not-pair",
        "merges-missing",
        "not-bpe",
        "vocab-id-not-int",
        "added-not-list",
        "added-not-object",
        "added-id-not-int",
        "added-clashes-with-vocab",
    ],
)
def test_refusals(tokenizer: dict[str, Any], edit: Edit, category: str) -> None:
    assert _refused(tokenizer, edit) == category


def test_vocab_size_smaller_than_tokenizer(tokenizer: dict[str, Any]) -> None:
    assert _refused(tokenizer, lambda t: None, size=1000) == "unsupported_tokenizer"


def test_duplicate_token_text(tokenizer: dict[str, Any]) -> None:
    def duplicate(t: dict[str, Any]) -> None:
        t["added_tokens"].append({"id": 1024, "content": "a", "special": False})

    assert _refused(tokenizer, duplicate, size=1025) == "unsupported_tokenizer"


def test_token_types_follow_llama_cpp_rules(tokenizer: dict[str, Any]) -> None:
    """Special added tokens and ones that look like ``<|...|>`` are CONTROL."""
    t = copy.deepcopy(tokenizer)
    t["added_tokens"] += [
        {"id": 1024, "content": "<pad>", "special": True},
        {"id": 1025, "content": "<|looks|>", "special": False},
        {"id": 1026, "content": "plain", "special": False},
    ]
    types = read_vocab(t, 1027).token_types
    assert types[1024:] == [TOKEN_CONTROL, TOKEN_CONTROL, TOKEN_USER_DEFINED]


@pytest.mark.parametrize(
    ("tokenizer_config", "config"),
    [
        ({"eos_token": 5, "bos_token": None}, {"bos_token_id": 1019, "eos_token_id": 1021}),
        ({"eos_token": "<|im_end|>", "bos_token": None}, {"bos_token_id": 99999}),
        ({"eos_token": "<|im_end|>", "bos_token": None}, {"bos_token_id": True}),
        (
            {"eos_token": "<|im_end|>", "bos_token": None, "add_bos_token": "no"},
            {"bos_token_id": 1019},
        ),
    ],
    ids=["token-not-text", "id-out-of-range", "id-bool", "add-bos-not-bool"],
)
def test_special_refusals(
    tokenizer: dict[str, Any], tokenizer_config: dict[str, Any], config: dict[str, Any]
) -> None:
    vocab = read_vocab(tokenizer, 1024)
    with pytest.raises(ConvertError) as info:
        resolve_special(vocab, tokenizer_config, config)
    assert info.value.category == "special_token_unresolved"


def test_special_ids_prefer_tokenizer_config(tokenizer: dict[str, Any]) -> None:
    vocab = read_vocab(tokenizer, 1024)
    special = resolve_special(
        vocab,
        {"eos_token": {"content": "<|im_end|>"}, "bos_token": None, "pad_token": None},
        {"bos_token_id": 1019, "eos_token_id": 3},
    )
    assert (special.bos, special.eos, special.pad, special.add_bos) == (1019, 1021, None, False)
