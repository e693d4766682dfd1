"""Shapes where our converter could differ from llama.cpp's ``convert_hf_to_gguf.py``.

llama.cpp's converter needs torch, which the project does not install, so each case
states the expectation its code gives, with the function and line in the pinned
``llama-cpp-python==0.3.36`` sdist (``vendor/llama.cpp/``, FIELD-NOTES.md), and checks
our GGUF against it:

(a) a tied config that still carries ``lm_head.weight``: ``TextModel`` writes every
    tensor the checkpoint holds; ``conversion/qwen.py`` (``Qwen2Model``,
    ``Qwen3Model``) and ``conversion/llama.py`` drop nothing for
    ``tie_word_embeddings``, so ``lm_head.weight`` becomes ``output.weight``.
(b) tensor order within a shard: ``gguf-py/gguf/utility.py`` ``SafetensorsLocal``
    (line 333) sorts each shard's tensors by name; ``ModelBase.index_tensors``
    (``conversion/base.py`` lines 236-258) walks shards in sorted order.
(c) a Llama-3-style tokenizer: ``gguf-py/gguf/vocab.py``
    ``SpecialVocab._try_load_from_tokenizer_json`` (lines 235-318): a
    ``TemplateProcessing`` whose ``single`` starts with the BOS token sets
    ``add_bos_token`` true; the ``pair`` ``BOS A BOS B`` sets ``add_sep_token`` false;
    what the post-processor says wins over ``tokenizer_config.json`` (lines 341-347).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from host.model.categories import ConvertError
from host.model.convert import convert, expected_source_shapes, read_hparams
from host.model.safetensors_header import parse_header, read_f32
from host.model.synth import synthesize_tiny
from host.model.verify_gguf import verify_gguf
from tests.host.model.divergence_cases import BOS, build, mixed_dtypes
from tests.host.model.helpers import edit_json

Copy = Callable[[Path], Path]


def _fields(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _names(path: Path) -> list[str]:
    return [t.name for t in gguf.GGUFReader(path).tensors]


# (a) ---------------------------------------------------------------------------------


def test_tied_config_with_lm_head_writes_output_weight(tmp_path: Path) -> None:
    root = build("qwen3-tied-lm-head", tmp_path / "src")
    assert json.loads((root / "config.json").read_text())["tie_word_embeddings"] is True
    result = convert(root, tmp_path / "out", "f32")
    reader = gguf.GGUFReader(result.path)
    tensors = {t.name: t for t in reader.tensors}
    assert "output.weight" in tensors and "token_embd.weight" in tensors
    header = parse_header(root / "model.safetensors")
    head = read_f32(root / "model.safetensors", header.tensors["lm_head.weight"])
    embed = read_f32(root / "model.safetensors", header.tensors["model.embed_tokens.weight"])
    assert not np.array_equal(head, embed)
    got = np.asarray(tensors["output.weight"].data).reshape(head.shape)
    assert np.array_equal(got, head)  # the checkpoint's lm_head, not the embedding
    assert _names(result.path)[0] == "output.weight"  # "lm_head..." sorts first
    verify_gguf(result.path, root, "f32", expected_sha256=result.sha256)


def test_tied_config_without_lm_head_has_no_output_weight(tmp_path: Path, tiny_dir: Path) -> None:
    result = convert(tiny_dir, tmp_path / "out", "f32")
    assert "output.weight" not in _names(result.path)


# (b) ---------------------------------------------------------------------------------


def test_mixed_dtypes_are_written_in_name_order(tmp_path: Path) -> None:
    """The ``safetensors`` writer groups tensors by dtype (F32 before BF16, then by
    name); llama.cpp lists each shard by name, and so must we."""
    root = tmp_path / "src"
    synthesize_tiny(root)
    order = mixed_dtypes(root)
    assert order != sorted(order)
    assert list(parse_header(root / "model.safetensors").tensors) == order
    result = convert(root, tmp_path / "out", "bf16")
    hparams = read_hparams(json.loads((root / "config.json").read_text()))
    gguf_name = {hf: names[0] for hf, names in expected_source_shapes(hparams).items()}
    assert _names(result.path) == [gguf_name[n] for n in sorted(order)]  # llama.cpp's order
    verify_gguf(result.path, root, "bf16", expected_sha256=result.sha256)


# (c) ---------------------------------------------------------------------------------


def _with_post(root: Path, post: dict[str, Any], **tokenizer_config: Any) -> None:
    edit_json(root / "tokenizer.json", lambda t: t.__setitem__("post_processor", post))
    edit_json(root / "tokenizer_config.json", lambda c: c.update(tokenizer_config))


def test_llama3_template_processing_adds_bos(tmp_path: Path) -> None:
    root = build("llama-llama3-tokenizer", tmp_path / "src")
    assert json.loads((root / "tokenizer_config.json").read_text())["add_bos_token"] is False
    result = convert(root, tmp_path / "out", "f32")
    fields = _fields(result.path)
    assert fields["tokenizer.ggml.add_bos_token"] is True  # the post-processor wins
    assert fields["tokenizer.ggml.add_eos_token"] is False
    assert fields["tokenizer.ggml.add_sep_token"] is False  # pair "BOS A BOS B"
    verify_gguf(result.path, root, "f32", expected_sha256=result.sha256)


def test_byte_level_post_processor_wins_over_tokenizer_config(tmp_path: Path) -> None:
    root = build("qwen3-byte-level-over-config", tmp_path / "src")
    fields = _fields(convert(root, tmp_path / "out", "f32").path)
    assert fields["tokenizer.ggml.add_bos_token"] is False
    assert "tokenizer.ggml.add_sep_token" not in fields


def test_no_post_processor_takes_tokenizer_config(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy
) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "tokenizer.json", lambda t: t.__setitem__("post_processor", None))
    edit_json(root / "tokenizer_config.json", lambda c: c.update(add_bos_token=True))
    fields = _fields(convert(root, tmp_path / "out", "f32").path)
    assert fields["tokenizer.ggml.add_bos_token"] is True


def _single(*items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "TemplateProcessing", "single": list(items), "pair": []}


BOS_ITEM = {"SpecialToken": {"id": BOS, "type_id": 0}}
EOS_ITEM = {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}
A_ITEM = {"Sequence": {"id": "A", "type_id": 0}}


@pytest.mark.parametrize(
    "post",
    [
        _single(A_ITEM, EOS_ITEM),  # trailing special: llama.cpp rewrites EOS/EOT
        _single({"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, A_ITEM),  # not BOS
        {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
        {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 0]},
    ],
    ids=["trailing-special", "leading-non-bos", "roberta", "bert"],
)
def test_post_processors_not_modelled_are_refused(
    tiny_dir: Path, copy_of: Copy, post: dict[str, Any]
) -> None:
    root = copy_of(tiny_dir)
    _with_post(root, post, bos_token=BOS)
    with pytest.raises(ConvertError) as info:
        convert(root, root.parent / "out", "f32")
    assert (info.value.category, info.value.subject) == ("unsupported_tokenizer", "tokenizer.json")
