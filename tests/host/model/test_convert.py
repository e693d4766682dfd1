"""safetensors -> GGUF conversion: round trips, metadata, refusals, staging, streaming."""

from __future__ import annotations

import hashlib
import json
import math
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from host.model.categories import ConvertError, OutType
from host.model.convert import GGUF_NAME, convert, plan_conversion, write_gguf
from host.model.safetensors_header import parse_header, read_f32
from host.model.synth import LLAMA_TINY, QWEN3_TINY, TinySpec, synthesize
from host.model.verify_gguf import check_tensors, verify_gguf
from host.model.vocab import TOKEN_CONTROL, TOKEN_NORMAL, TOKEN_USER_DEFINED
from tests.host.model.helpers import Tensors, edit_json, edit_weights, load_tensors

Copy = Callable[[Path], Path]
OUTTYPES: list[OutType] = ["f32", "f16", "bf16", "q8_0"]
Q = gguf.GGMLQuantizationType


def _refused(source: Path, outtype: OutType = "f32", target: Path | None = None) -> str:
    out = target if target is not None else source.parent / "out"
    with pytest.raises(ConvertError) as info:
        convert(source, out, outtype)
    assert not (out / GGUF_NAME).exists()
    return info.value.category


def _fields(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("model", ["qwen3", "llama"])
def test_round_trip(
    request: pytest.FixtureRequest, tmp_path: Path, model: str, outtype: OutType
) -> None:
    source: Path = request.getfixturevalue("tiny_dir" if model == "qwen3" else "llama_dir")
    result = convert(source, tmp_path / "out", outtype)
    data = result.path.read_bytes()
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    assert result.size == len(data)
    report = verify_gguf(result.path, source, outtype, expected_sha256=result.sha256)
    assert report.sha256 == result.sha256
    # Independent of verify_gguf: dequantize the embedding and compare with the source.
    reader = gguf.GGUFReader(result.path)
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    header = parse_header(source / "model.safetensors")
    src = read_f32(source / "model.safetensors", header.tensors["model.embed_tokens.weight"])
    got = gguf.quants.dequantize(np.asarray(embd.data), embd.tensor_type).reshape(src.shape)
    tolerance = {"f32": 0.0, "bf16": 0.0, "f16": 2e-3, "q8_0": 0.02}[outtype]
    assert np.max(np.abs(got - src)) <= tolerance * max(1.0, float(np.max(np.abs(src))))
    expected_tensors = 24 if model == "qwen3" else 21
    assert result.tensor_count == len(reader.tensors) == expected_tensors


def test_qwen3_metadata_has_every_key_llama_cpp_needs(tmp_path: Path, tiny_dir: Path) -> None:
    result = convert(tiny_dir, tmp_path / "out", "bf16")
    fields = _fields(result.path)
    for key in (
        "general.architecture",
        "qwen3.block_count",
        "qwen3.context_length",
        "qwen3.embedding_length",
        "qwen3.feed_forward_length",
        "qwen3.attention.head_count",
        "qwen3.attention.head_count_kv",
        "qwen3.attention.layer_norm_rms_epsilon",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.add_bos_token",
    ):
        assert key in fields, key
    assert fields["general.architecture"] == "qwen3"
    assert fields["tokenizer.ggml.pre"] == "qwen2"
    assert fields["qwen3.rope.freq_base"] == 1e6
    assert fields["qwen3.attention.key_length"] == fields["qwen3.attention.value_length"] == 32
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_BF16
    types = fields["tokenizer.ggml.token_type"]
    tokens = fields["tokenizer.ggml.tokens"]
    assert types[tokens.index("<|im_end|>")] == TOKEN_CONTROL
    assert types[tokens.index("<tool_call>")] == TOKEN_USER_DEFINED
    assert types[0] == TOKEN_NORMAL
    assert fields["tokenizer.ggml.bos_token_id"] == tokens.index("<|endoftext|>")
    assert fields["tokenizer.ggml.eos_token_id"] == tokens.index("<|im_end|>")
    assert fields["tokenizer.ggml.padding_token_id"] == tokens.index("<|endoftext|>")
    assert fields["tokenizer.ggml.add_bos_token"] is False
    assert "<tool_call>" in fields["tokenizer.chat_template"]
    assert fields["tokenizer.ggml.merges"][0].count(" ") == 1


def test_llama_metadata_and_permuted_qk(tmp_path: Path, llama_dir: Path) -> None:
    result = convert(llama_dir, tmp_path / "out", "f32")
    fields = _fields(result.path)
    assert fields["llama.rope.dimension_count"] == 16
    assert fields["llama.vocab_size"] == 1024
    assert fields["llama.rope.freq_base"] == 10000.0
    reader = gguf.GGUFReader(result.path)
    tensors = {t.name: t for t in reader.tensors}
    assert "output.weight" in tensors  # untied
    header = parse_header(llama_dir / "model.safetensors")
    src_q = read_f32(
        llama_dir / "model.safetensors", header.tensors["model.layers.0.self_attn.q_proj.weight"]
    )
    got_q = np.asarray(tensors["blk.0.attn_q.weight"].data).reshape(src_q.shape)
    assert not np.array_equal(got_q, src_q)  # permuted ...
    assert sorted(map(bytes, got_q)) == sorted(map(bytes, src_q))  # ... rows, not values
    src_v = read_f32(
        llama_dir / "model.safetensors", header.tensors["model.layers.0.self_attn.v_proj.weight"]
    )
    got_v = np.asarray(tensors["blk.0.attn_v.weight"].data).reshape(src_v.shape)
    assert np.array_equal(got_v, src_v)  # v is not permuted


def test_conversion_is_deterministic(tmp_path: Path, tiny_dir: Path) -> None:
    a = convert(tiny_dir, tmp_path / "a", "q8_0")
    b = convert(tiny_dir, tmp_path / "b", "q8_0")
    assert a.sha256 == b.sha256
    assert a.path.read_bytes() == b.path.read_bytes()


def test_untied_model_requires_lm_head(llama_dir: Path, copy_of: Copy) -> None:
    root = copy_of(llama_dir)
    edit_weights(root, lambda t: t.pop("lm_head.weight"))
    assert _refused(root) == "missing_tensor"


def test_missing_layer_tensor(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_weights(root, lambda t: t.pop("model.layers.1.self_attn.k_norm.weight"))
    assert _refused(root) == "missing_tensor"


def test_unexpected_tensor(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)

    def add_bias(t: Tensors) -> None:
        t["model.layers.0.self_attn.q_proj.bias"] = t["model.norm.weight"]

    edit_weights(root, add_bias)
    assert _refused(root) == "unexpected_tensor"


def test_qk_norm_is_unexpected_for_llama(llama_dir: Path, copy_of: Copy) -> None:
    root = copy_of(llama_dir)

    def add_norm(t: Tensors) -> None:
        t["model.layers.0.self_attn.q_norm.weight"] = ("BF16", t["model.norm.weight"][1][:16])

    edit_weights(root, add_norm)
    assert _refused(root) == "unexpected_tensor"


def test_tensor_shape_mismatch(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)

    def reshape(t: Tensors) -> None:
        dtype, array = t["model.layers.0.mlp.up_proj.weight"]
        t["model.layers.0.mlp.up_proj.weight"] = (dtype, array.reshape(64, 128))

    edit_weights(root, reshape)
    assert _refused(root) == "tensor_shape_mismatch"


def test_integer_weights_refused(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)

    def integer(t: Tensors) -> None:
        _, array = t["model.norm.weight"]
        t["model.norm.weight"] = ("I16", array.view(np.int16))

    edit_weights(root, integer)
    assert _refused(root) == "tensor_shape_mismatch"


def test_unsupported_architecture(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "config.json", lambda c: c.update(model_type="mistral"))
    assert _refused(root) == "unsupported_architecture"
    edit_json(
        root / "config.json",
        lambda c: c.update(model_type="qwen3", architectures=["Qwen3ForSequenceClassification"]),
    )
    assert _refused(root) == "unsupported_architecture"


@pytest.mark.parametrize(
    "change",
    [
        {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6}},
        {"attention_bias": True},
        {"hidden_act": "gelu"},
        {"use_sliding_window": True},
        {"num_key_value_heads": 3},
        {"head_dim": 33},
        {"hidden_size": "64"},
        {"rms_norm_eps": None},
        {"tie_word_embeddings": "yes"},
    ],
    ids=[
        "yarn",
        "rope-params",
        "bias",
        "gelu",
        "swa",
        "kv-heads",
        "odd-head-dim",
        "str-int",
        "no-eps",
        "tie-str",
    ],
)
def test_unsupported_config(tiny_dir: Path, copy_of: Copy, change: dict[str, Any]) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "config.json", lambda c: c.update(change))
    assert _refused(root) == "unsupported_config"


def test_head_dim_not_derivable(llama_dir: Path, copy_of: Copy) -> None:
    """Without ``head_dim``, hidden must divide by heads (64 / 5 does not)."""
    root = copy_of(llama_dir)
    edit_json(
        root / "config.json", lambda c: c.update(num_attention_heads=5, num_key_value_heads=5)
    )
    assert _refused(root) == "unsupported_config"


def test_rope_parameters_form_is_read(tmp_path: Path, tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)

    def modern(c: dict[str, Any]) -> None:
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.pop("rope_theta")}
        c.pop("rope_scaling")

    edit_json(root / "config.json", modern)
    result = convert(root, tmp_path / "out", "f32")
    assert _fields(result.path)["qwen3.rope.freq_base"] == 1e6
    verify_gguf(result.path, root, "f32")


def test_config_unreadable(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "config.json").write_text("{")
    assert _refused(root) == "config_unreadable"


def test_tokenizer_unreadable(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "tokenizer.json").unlink()
    assert _refused(root) == "tokenizer_unreadable"


def test_unknown_pretokenizer(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)

    def gpt2_regex(t: dict[str, Any]) -> None:
        t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\s+|\w+"

    edit_json(root / "tokenizer.json", gpt2_regex)
    assert _refused(root) == "unknown_pretokenizer"


def test_pretokenizer_flags_must_match(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "tokenizer.json", lambda t: t["model"].update(ignore_merges=True))
    assert _refused(root) == "unknown_pretokenizer"
    root2 = copy_of(tiny_dir)
    edit_json(root2 / "tokenizer.json", lambda t: t.update(normalizer={"type": "Lowercase"}))
    assert _refused(root2) == "unknown_pretokenizer"


def test_nfc_normalizer_accepted_for_qwen2(tmp_path: Path, tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "tokenizer.json", lambda t: t.update(normalizer={"type": "NFC"}))
    assert _fields(convert(root, tmp_path / "out", "f32").path)["tokenizer.ggml.pre"] == "qwen2"


def test_byte_fallback_tokenizer_refused(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "tokenizer.json", lambda t: t["model"].update(byte_fallback=True))
    assert _refused(root) == "unsupported_tokenizer"


def test_special_token_unresolved(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "tokenizer_config.json", lambda t: t.update(eos_token="<|nope|>"))
    assert _refused(root) == "special_token_unresolved"


def test_missing_bos_everywhere(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "config.json", lambda c: c.pop("bos_token_id"))
    assert _refused(root) == "special_token_unresolved"


def test_missing_chat_template(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "tokenizer_config.json", lambda t: t.pop("chat_template"))
    assert _refused(root) == "unsupported_tokenizer"


def test_chat_template_from_jinja_file(tmp_path: Path, tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    template = json.loads((root / "tokenizer_config.json").read_text())["chat_template"]
    edit_json(root / "tokenizer_config.json", lambda t: t.pop("chat_template"))
    (root / "chat_template.jinja").write_text(template)
    fields = _fields(convert(root, tmp_path / "out", "f32").path)
    assert fields["tokenizer.chat_template"] == template


def test_vocab_padded_past_tokenizer(tmp_path: Path, tiny_dir: Path, copy_of: Copy) -> None:
    """Real Qwen pads the embedding past the tokenizer: [PADn] tokens, type UNUSED."""
    root = copy_of(tiny_dir)
    edit_json(root / "config.json", lambda c: c.update(vocab_size=1056))

    def pad(t: Tensors) -> None:
        dtype, array = t["model.embed_tokens.weight"]
        t["model.embed_tokens.weight"] = (dtype, np.concatenate([array, array[:32]]))

    edit_weights(root, pad)
    result = convert(root, tmp_path / "out", "f32")
    fields = _fields(result.path)
    assert len(fields["tokenizer.ggml.tokens"]) == 1056
    assert fields["tokenizer.ggml.tokens"][1055] == "[PAD1055]"
    assert fields["tokenizer.ggml.token_type"][1055] == 5
    verify_gguf(result.path, root, "f32")


def test_sharded_checkpoint_matches_single_file(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy
) -> None:
    from host.model.synth import safetensors_bytes

    root = copy_of(tiny_dir)
    tensors = load_tensors(root / "model.safetensors")
    names = sorted(tensors)
    halves = {
        "model-00001-of-00002.safetensors": names[:10],
        "model-00002-of-00002.safetensors": names[10:],
    }
    weight_map = {}
    for shard, shard_names in halves.items():
        (root / shard).write_bytes(safetensors_bytes({n: tensors[n] for n in shard_names}))
        weight_map.update(dict.fromkeys(shard_names, shard))
    (root / "model.safetensors").unlink()
    index = root / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    sharded = convert(root, tmp_path / "sharded", "bf16")
    single = convert(tiny_dir, tmp_path / "single", "bf16")
    assert sharded.sha256 == single.sha256
    # an index that disagrees with the shard headers is refused
    weight_map[names[0]] = "model-00002-of-00002.safetensors"
    index.write_text(json.dumps({"weight_map": weight_map}))
    assert _refused(root, target=tmp_path / "bad") == "weights_index_invalid"
    index.write_text(json.dumps({"weight_map": {**weight_map, "extra": "../x.safetensors"}}))
    assert _refused(root, target=tmp_path / "bad") == "weights_index_invalid"


def _shard(root: Path) -> dict[str, str]:
    """Split the tiny checkpoint into two shards plus an index; return the weight map."""
    from host.model.synth import safetensors_bytes

    tensors = load_tensors(root / "model.safetensors")
    names = sorted(tensors)
    weight_map: dict[str, str] = {}
    for shard, part in (("a.safetensors", names[:10]), ("b.safetensors", names[10:])):
        (root / shard).write_bytes(safetensors_bytes({n: tensors[n] for n in part}))
        weight_map.update(dict.fromkeys(part, shard))
    (root / "model.safetensors").unlink()
    return weight_map


@pytest.mark.parametrize(
    ("damage", "category"),
    [
        ("shard-missing", "weights_missing"),
        ("index-not-json", "weights_index_invalid"),
        ("index-empty", "weights_index_invalid"),
        ("index-names-absent-tensor", "weights_index_invalid"),
    ],
)
def test_damaged_sharded_checkpoint(
    tiny_dir: Path, copy_of: Copy, damage: str, category: str
) -> None:
    root = copy_of(tiny_dir)
    weight_map = _shard(root)
    index = root / "model.safetensors.index.json"
    if damage == "shard-missing":
        (root / "b.safetensors").unlink()
        index.write_text(json.dumps({"weight_map": weight_map}))
    elif damage == "index-not-json":
        index.write_text("{")
    elif damage == "index-empty":
        index.write_text(json.dumps({"weight_map": {}}))
    else:
        index.write_text(
            json.dumps({"weight_map": {**weight_map, "lm_head.weight": "a.safetensors"}})
        )
    assert _refused(root) == category


def test_weights_missing(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "model.safetensors").unlink()
    assert _refused(root) == "weights_missing"


def test_source_header_invalid(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    path = root / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1])  # offsets now run past the end
    with pytest.raises(ConvertError) as info:
        convert(root, root.parent / "out", "f32")
    assert info.value.category == "source_header_invalid"
    assert info.value.__cause__ is not None
    assert getattr(info.value.__cause__, "category", None) == "offsets_out_of_range"


def test_unsupported_outtype(tiny_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConvertError) as info:
        convert(tiny_dir, tmp_path / "out", "q4_0")  # type: ignore[arg-type]
    assert info.value.category == "unsupported_outtype"


def test_q8_0_falls_back_to_f16_for_rows_not_in_blocks(tmp_path: Path) -> None:
    spec = TinySpec("qwen3", "Qwen3ForCausalLM", 64, 1, 4, 2, 32, 80, 1e6, True, True, True)
    source = tmp_path / "odd"
    synthesize(source, spec)
    result = convert(source, tmp_path / "out", "q8_0")
    types = {t.name: t.tensor_type for t in gguf.GGUFReader(result.path).tensors}
    assert types["blk.0.ffn_down.weight"] == Q.F16  # ne0 = 80
    assert types["blk.0.ffn_up.weight"] == Q.Q8_0  # ne0 = 64
    assert types["blk.0.attn_norm.weight"] == Q.F32
    verify_gguf(result.path, source, "q8_0", result.sha256)


# --- staging ---------------------------------------------------------------------------


def test_non_empty_target_refused_and_untouched(tmp_path: Path, tiny_dir: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    assert _refused(tiny_dir, target=target) == "target_not_empty"
    assert sorted(p.name for p in target.iterdir()) == ["keep.txt"]


def test_empty_target_is_filled(tmp_path: Path, tiny_dir: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    convert(tiny_dir, target, "f32")
    assert sorted(p.name for p in target.iterdir()) == [GGUF_NAME]


def test_stale_staging_is_removed(tmp_path: Path, tiny_dir: Path) -> None:
    target = tmp_path / "out"
    stale = tmp_path / ".out.staging-killed"  # a dead filler's: nobody holds its lock
    (stale / "content").mkdir(parents=True)
    (stale / "content" / GGUF_NAME).write_bytes(b"half a file")
    result = convert(tiny_dir, target, "f32")
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    verify_gguf(result.path, tiny_dir, "f32", result.sha256)


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_partial_removed_on_interrupt(
    tmp_path: Path, tiny_dir: Path, error: type[BaseException]
) -> None:
    target = tmp_path / "out"
    written: list[str] = []

    def interrupt(name: str) -> None:
        written.append(name)
        staged = list(tmp_path.glob(".out.staging-*/*/" + GGUF_NAME))
        assert staged and staged[0].stat().st_size > 0  # a partial file exists right now
        if len(written) == 5:
            raise error

    with pytest.raises(error):
        convert(tiny_dir, target, "f32", progress=interrupt)
    assert len(written) == 5
    assert list(tmp_path.iterdir()) == []


# --- streaming -------------------------------------------------------------------------


def test_peak_memory_is_about_one_tensor(tmp_path: Path) -> None:
    """Traced allocations stay near the largest tensor, far below the model."""
    spec = TinySpec("llama", "LlamaForCausalLM", 256, 6, 4, 2, 64, 1024, 1e4, False, False, False)
    source = tmp_path / "bigger"
    synthesize(source, spec)
    plan = plan_conversion(source, "f32")
    largest = max(t.nbytes for t in plan.tensors)
    total = sum(t.nbytes for t in plan.tensors)
    assert total > 20 * largest // 2
    tracemalloc.start()
    try:
        convert(source, tmp_path / "out", "f32")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * largest, (peak, largest, total)


def test_plan_uses_spec_shapes() -> None:
    assert QWEN3_TINY.head_dim * QWEN3_TINY.heads != QWEN3_TINY.hidden
    assert LLAMA_TINY.head_dim * LLAMA_TINY.heads == LLAMA_TINY.hidden


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_row_slices_give_the_same_bytes(tmp_path: Path, llama_dir: Path, outtype: OutType) -> None:
    """Slices of one row (or of a few) encode to exactly the whole-tensor bytes."""
    plan = plan_conversion(llama_dir, outtype)
    whole = write_gguf(plan, tmp_path / "whole.gguf")
    chunks = (1, 700, 5000) if outtype == "q8_0" else (700, 5000)
    for chunk in chunks:
        assert write_gguf(plan, tmp_path / f"c{chunk}.gguf", chunk_bytes=chunk) == whole
    reader = gguf.GGUFReader(tmp_path / "whole.gguf")
    check_tensors(reader, plan, chunk_bytes=700)  # verifier slices too


def test_peak_memory_is_bounded_by_the_slice(tmp_path: Path) -> None:
    """With small slices, traced memory stays below even the largest tensor."""
    spec = TinySpec("qwen3", "Qwen3ForCausalLM", 256, 1, 4, 2, 64, 4096, 1e6, True, True, True)
    source = tmp_path / "wide"
    synthesize(source, spec)
    plan = plan_conversion(source, "q8_0")
    largest_f32 = 4096 * 256 * 4  # each ffn weight as float32: 4 MiB
    assert max(math.prod(t.shape) * 4 for t in plan.tensors) == largest_f32
    tracemalloc.start()
    try:
        write_gguf(plan, tmp_path / "out.gguf", chunk_bytes=64 << 10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < largest_f32 // 4, (peak, largest_f32)
