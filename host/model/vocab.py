"""Read a byte-level BPE vocabulary from ``tokenizer.json`` in llama.cpp's terms.

Why: llama.cpp does not run the Hugging Face tokenizer; it re-implements it from
GGUF metadata. Three facts decide whether the two agree, and each is silently wrong
when guessed: the pre-tokenizer (``tokenizer.ggml.pre``: a different regex gives a
different tokenization), the token types (special tokens are parsed only when typed
CONTROL or USER_DEFINED) and the merges. llama.cpp's own converter identifies the
pre-tokenizer by hashing a tokenization of a probe text with ``transformers``; we
identify it from the declared pre-tokenizer itself and refuse what we do not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host.model.categories import ConvertError

# Regexes exactly as the Hugging Face tokenizer.json files declare them.
QWEN2_PRETOKENIZER_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_PRETOKENIZER_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class KnownPre:
    """A pre-tokenizer llama.cpp implements, and the BPE flags it implies there."""

    gguf_pre: str
    ignore_merges: bool
    normalizers: tuple[str | None, ...]


# llama.cpp's "llama-bpe" sets ignore_merges; its "qwen2" does not. Qwen ships an NFC
# normalizer that llama.cpp does not apply; our synthesized tokenizer declares none.
KNOWN_PRETOKENIZERS: dict[str, KnownPre] = {
    QWEN2_PRETOKENIZER_REGEX: KnownPre("qwen2", False, (None, "NFC")),
    LLAMA3_PRETOKENIZER_REGEX: KnownPre("llama-bpe", True, (None,)),
}

TOKEN_NORMAL = 1
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4
TOKEN_UNUSED = 5


@dataclass(frozen=True)
class Vocab:
    """Everything llama.cpp's BPE tokenizer needs, in GGUF order."""

    pre: str
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    token_ids: dict[str, int]


def load_json_object(path: Path) -> dict[str, Any]:
    """Load a file that must hold one JSON object (OSError, ValueError or TypeError)."""
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    return value


def _looks_special(text: str) -> bool:
    return text.startswith("<|") and text.endswith("|>")


def detect_pre(tokenizer: dict[str, Any]) -> str:
    """Name the pre-tokenizer as llama.cpp knows it, or refuse."""
    pre = tokenizer.get("pre_tokenizer")
    model = tokenizer.get("model")
    if not isinstance(pre, dict) or not isinstance(model, dict):
        raise ConvertError("unknown_pretokenizer")
    parts = pre.get("pretokenizers")
    if pre.get("type") != "Sequence" or not isinstance(parts, list) or len(parts) != 2:
        raise ConvertError("unknown_pretokenizer")
    split, byte_level = parts
    if not isinstance(split, dict) or not isinstance(byte_level, dict):
        raise ConvertError("unknown_pretokenizer")
    pattern = split.get("pattern")
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    known = KNOWN_PRETOKENIZERS.get(regex) if isinstance(regex, str) else None
    if (
        known is None
        or split.get("type") != "Split"
        or split.get("behavior") != "Isolated"
        or split.get("invert") is not False
        or byte_level.get("type") != "ByteLevel"
        or byte_level.get("add_prefix_space") is not False
        or byte_level.get("use_regex") is not False
        or bool(model.get("ignore_merges", False)) != known.ignore_merges
    ):
        raise ConvertError("unknown_pretokenizer")
    normalizer = tokenizer.get("normalizer")
    normalizer_type = normalizer.get("type") if isinstance(normalizer, dict) else None
    if normalizer is not None and normalizer_type is None:
        raise ConvertError("unknown_pretokenizer")
    if normalizer_type not in known.normalizers:
        raise ConvertError("unknown_pretokenizer")
    return known.gguf_pre


def _merge_text(merge: Any) -> str:
    if isinstance(merge, str) and merge.count(" ") == 1:
        return merge
    if isinstance(merge, list) and len(merge) == 2 and all(isinstance(m, str) for m in merge):
        if " " in merge[0] or " " in merge[1]:
            raise ConvertError("unsupported_tokenizer")
        return f"{merge[0]} {merge[1]}"
    raise ConvertError("unsupported_tokenizer")


def read_vocab(tokenizer: dict[str, Any], vocab_size: int) -> Vocab:
    """Build tokens, token types and merges for ids ``0 .. vocab_size-1``.

    Ids the tokenizer does not define (a model's embedding is often padded past
    its tokenizer) become ``[PAD<id>]`` of type UNUSED, as llama.cpp expects.
    """
    pre = detect_pre(tokenizer)
    model = tokenizer["model"]
    vocab = model.get("vocab")
    if (
        model.get("type") != "BPE"
        or model.get("byte_fallback", False)
        or not isinstance(vocab, dict)
    ):
        raise ConvertError("unsupported_tokenizer")
    by_id: dict[int, tuple[str, int]] = {}
    for text, token_id in vocab.items():
        if not isinstance(token_id, int) or token_id in by_id:
            raise ConvertError("unsupported_tokenizer")
        by_id[token_id] = (text, TOKEN_NORMAL)
    added = tokenizer.get("added_tokens", [])
    if not isinstance(added, list):
        raise ConvertError("unsupported_tokenizer")
    for item in added:
        if not isinstance(item, dict):
            raise ConvertError("unsupported_tokenizer")
        token_id, content = item.get("id"), item.get("content")
        if not isinstance(token_id, int) or not isinstance(content, str):
            raise ConvertError("unsupported_tokenizer")
        special = item.get("special") is True or _looks_special(content)
        kind = TOKEN_CONTROL if special else TOKEN_USER_DEFINED
        if token_id in by_id and by_id[token_id][0] != content:
            raise ConvertError("unsupported_tokenizer")
        by_id[token_id] = (content, kind)
    if not by_id or max(by_id) >= vocab_size or min(by_id) < 0:
        raise ConvertError("unsupported_tokenizer")
    tokens: list[str] = []
    types: list[int] = []
    for token_id in range(vocab_size):
        text, kind = by_id.get(token_id, (f"[PAD{token_id}]", TOKEN_UNUSED))
        tokens.append(text)
        types.append(kind)
    if len(set(tokens)) != len(tokens):
        raise ConvertError("unsupported_tokenizer")
    merges_raw = model.get("merges")
    if not isinstance(merges_raw, list):
        raise ConvertError("unsupported_tokenizer")
    merges = [_merge_text(merge) for merge in merges_raw]
    token_ids = {text: index for index, text in enumerate(tokens)}
    return Vocab(pre, tokens, types, merges, token_ids)


def special_token_text(value: Any) -> str | None:
    """A tokenizer_config special token: a string, ``{"content": ...}`` or null."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    raise ConvertError("special_token_unresolved")


@dataclass(frozen=True)
class SpecialIds:
    """Token ids llama.cpp needs to start, stop and pad, and whether it prepends BOS."""

    bos: int
    eos: int
    pad: int | None
    add_bos: bool
    add_eos: bool
    # tokenizer_config's ``add_prefix_space`` when it declares one (None otherwise)
    add_space_prefix: bool | None
    # tokenizer.ggml.add_sep_token: set only by a TemplateProcessing ``pair`` (None: absent)
    add_sep: bool | None = None


def _special_id(item: Any) -> str | None:
    """The ``SpecialToken`` id of a TemplateProcessing element (None for a ``Sequence``)."""
    if not isinstance(item, dict):
        raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    special = item.get("SpecialToken")
    if special is None:
        return None
    if not isinstance(special, dict) or not isinstance(special.get("id"), str):
        raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    return str(special["id"])


def _sequence_id(item: Any) -> str | None:
    sequence = item.get("Sequence") if isinstance(item, dict) else None
    return sequence.get("id") if isinstance(sequence, dict) else None


def _template_adds(
    processor: dict[str, Any], bos: str | None, eos: str | None, sep: str | None
) -> dict[str, bool]:
    """llama.cpp's reading of a ``TemplateProcessing`` post-processor, for the shapes
    whose meaning it does not change by rewriting special tokens.

    gguf-py ``SpecialVocab._try_load_from_tokenizer_json`` (``gguf/vocab.py`` lines
    252-318 in the llama-cpp-python 0.3.36 sdist): a ``single`` template that starts
    with the BOS special token means ``add_bos_token = true`` (Llama 3:
    ``<|begin_of_text|> $A``); a ``pair`` template ``A <x> B`` sets ``add_sep_token``
    (true only when ``<x>`` is the SEP or EOS token). A leading special token that is
    not BOS, or a trailing special token, makes llama.cpp rename BOS/EOS/EOT: those
    shapes are refused here rather than half-modelled.
    """
    adds: dict[str, bool] = {}
    single, pair = processor.get("single", []), processor.get("pair", [])
    if not isinstance(single, list) or not isinstance(pair, list):
        raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    first = last = None
    if len(single) > 1:
        first, last = _special_id(single[0]), _special_id(single[-1])
        if first is not None:
            if first != bos:
                raise ConvertError("unsupported_tokenizer", "tokenizer.json")
            adds["bos"] = True
        if last is not None:
            raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    if pair:
        start = 1 if first is not None and _special_id(pair[0]) == first else 0
        middle = pair[start:]
        if middle and _sequence_id(middle[0]) == "A" and _sequence_id(middle[-1]) == "B":
            middle = middle[1:-1]
            if middle:
                add_sep = False
                entry = _special_id(middle[0])
                if entry is not None and entry in (sep, eos) and last is None:
                    add_sep = True
                second = _special_id(middle[1]) if len(middle) == 2 else None
                if second is not None and second in (sep, eos):
                    add_sep = True
                adds["sep"] = add_sep
    return adds


def post_processor_adds(
    tokenizer: dict[str, Any], bos: str | None, eos: str | None, sep: str | None
) -> dict[str, bool]:
    """Which of BOS/EOS/SEP the tokenizer's post-processor adds, as llama.cpp reads it.

    ``ByteLevel`` declares "none" (BOS and EOS false unless set otherwise); a
    ``TemplateProcessing`` is read by :func:`_template_adds`; a ``Sequence`` is read
    element by element. What the post-processor declares wins over
    ``tokenizer_config.json``'s ``add_bos_token`` / ``add_eos_token`` (llama.cpp logs a
    mismatch and "opts for the latter"). Other post-processors are refused.
    """
    post = tokenizer.get("post_processor")
    if post is None:
        return {}
    if not isinstance(post, dict):
        raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    processors = post.get("processors", [post])
    if not isinstance(processors, list):
        raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    adds: dict[str, bool] = {}
    for processor in processors:
        kind = processor.get("type") if isinstance(processor, dict) else None
        if kind == "ByteLevel":
            adds.setdefault("bos", False)
            adds.setdefault("eos", False)
        elif kind == "TemplateProcessing":
            adds.update(_template_adds(processor, bos, eos, sep))
        else:
            raise ConvertError("unsupported_tokenizer", "tokenizer.json")
    return adds


def resolve_special(
    vocab: Vocab,
    tokenizer_config: dict[str, Any],
    config: dict[str, Any],
    tokenizer: dict[str, Any] | None = None,
) -> SpecialIds:
    """Resolve BOS/EOS/PAD ids: tokenizer_config names first, config.json ids second.

    Qwen declares ``bos_token: null`` and relies on ``config.json``'s
    ``bos_token_id``; an id that resolves nowhere is refused, never guessed.
    """

    def resolve(name: str) -> int | None:
        text = special_token_text(tokenizer_config.get(f"{name}_token"))
        if text is not None:
            if text not in vocab.token_ids:
                raise ConvertError("special_token_unresolved")
            return vocab.token_ids[text]
        fallback = config.get(f"{name}_token_id")
        if fallback is None:
            return None
        if isinstance(fallback, bool) or not isinstance(fallback, int):
            raise ConvertError("special_token_unresolved")
        if not 0 <= fallback < len(vocab.tokens):
            raise ConvertError("special_token_unresolved")
        return fallback

    bos, eos, pad = resolve("bos"), resolve("eos"), resolve("pad")
    if bos is None or eos is None:
        raise ConvertError("special_token_unresolved")
    adds = post_processor_adds(
        tokenizer or {},
        special_token_text(tokenizer_config.get("bos_token")),
        special_token_text(tokenizer_config.get("eos_token")),
        special_token_text(tokenizer_config.get("sep_token")),
    )
    add_bos = adds.get("bos", tokenizer_config.get("add_bos_token", False))
    add_eos = adds.get("eos", tokenizer_config.get("add_eos_token", False))
    prefix = tokenizer_config.get("add_prefix_space")
    if not isinstance(add_bos, bool) or not isinstance(add_eos, bool):
        raise ConvertError("special_token_unresolved", "tokenizer_config.json")
    if prefix is not None and not isinstance(prefix, bool):
        raise ConvertError("special_token_unresolved", "tokenizer_config.json")
    return SpecialIds(bos, eos, pad, add_bos, add_eos, prefix, adds.get("sep"))


def chat_template(source: Path, tokenizer_config: dict[str, Any]) -> str:
    """The chat template: tokenizer_config's, else ``chat_template.jinja``; else refused."""
    template = tokenizer_config.get("chat_template")
    if isinstance(template, str) and template:
        return template
    jinja = source / "chat_template.jinja"
    if template is None and jinja.is_file():
        text = jinja.read_text(encoding="utf-8")
        if text:
            return text
    raise ConvertError("unsupported_tokenizer")
