"""GGUF verification: each refusal on a GGUF damaged in exactly one way."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt
import pytest

from host.model.categories import VerifyError
from host.model.convert import convert, plan_conversion
from host.model.safetensors_header import DTYPES, widen
from host.model.verify_gguf import (
    IDENTITY_EXCEPT_NAN,
    VerifyReport,
    check_tensors,
    expected_metadata,
    has_nan,
    open_hashing,
    permutation_rows,
    storage_type,
    verify_gguf,
)
from tests.host.model.helpers import (
    SIGNALLING_BF16_NANS,
    edit_json,
    plant_signalling_nans,
)

V = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType
Copy = Callable[[Path], Path]


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> Path:
    """The tiny model at q8_0 (module-wide, read-only by convention)."""
    return convert(tiny_dir, tmp_path_factory.mktemp("gguf") / "out", "q8_0").path


def _refused(path: Path, source: Path, outtype: Any = "q8_0", sha: str | None = None) -> str:
    with pytest.raises(VerifyError) as info:
        verify_gguf(path, source, outtype, expected_sha256=sha)
    return info.value.category


def rewrite(
    source: Path,
    target: Path,
    *,
    drop_keys: tuple[str, ...] = (),
    set_keys: dict[str, tuple[Any, V, V | None]] | None = None,
    drop_tensors: tuple[str, ...] = (),
    add_tensors: dict[str, npt.NDArray[Any]] | None = None,
    replace_tensors: dict[str, npt.NDArray[Any]] | None = None,
) -> Path:
    """Copy a GGUF through GGUFReader/GGUFWriter with exactly the given changes."""
    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(target, arch)
    writer.kv_data[0].clear()  # the constructor pre-adds general.architecture
    changes = dict(set_keys or {})
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in drop_keys:
            continue
        if name in changes:
            value, vtype, sub = changes.pop(name)
            writer.add_key_value(name, value, vtype, sub)
            continue
        sub_type = field.types[-1] if field.types[0] == V.ARRAY else None
        writer.add_key_value(name, field.contents(), field.types[0], sub_type)
    for name, (value, vtype, sub) in changes.items():
        writer.add_key_value(name, value, vtype, sub)
    for tensor in reader.tensors:
        if tensor.name in drop_tensors:
            continue
        if replace_tensors and tensor.name in replace_tensors:
            writer.add_tensor(tensor.name, replace_tensors[tensor.name])
            continue
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
    for name, array in (add_tensors or {}).items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


def test_faithful_rewrite_verifies(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    """Control for the helper: an unchanged rewrite is byte-identical and verifies."""
    copy = rewrite(converted, tmp_path / "same.gguf")
    assert copy.read_bytes() == converted.read_bytes()
    verify_gguf(copy, tiny_dir, "q8_0")


def test_corrupt_tensor_byte(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    shutil.copy(converted, path)
    tensor = next(t for t in gguf.GGUFReader(converted).tensors if t.name == "blk.1.ffn_up.weight")
    with path.open("r+b") as handle:
        handle.seek(tensor.data_offset + 100)
        byte = handle.read(1)
        handle.seek(tensor.data_offset + 100)
        handle.write(bytes([byte[0] ^ 0x01]))
    assert _refused(path, tiny_dir) == "tensor_data_mismatch"


def test_corrupt_f32_norm_by_one_ulp(tiny_dir: Path, tmp_path: Path) -> None:
    good = convert(tiny_dir, tmp_path / "f32", "f32").path
    reader = gguf.GGUFReader(good)
    norm = next(t for t in reader.tensors if t.name == "blk.0.attn_q_norm.weight")
    values = np.array(norm.data).copy()
    values[3] = np.nextafter(values[3], np.float32(2.0))
    bad = rewrite(good, tmp_path / "ulp.gguf", replace_tensors={norm.name: values})
    assert _refused(bad, tiny_dir, "f32") == "tensor_data_mismatch"


@pytest.mark.parametrize(
    "key",
    [
        "qwen3.attention.key_length",
        "qwen3.rope.freq_base",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.padding_token_id",
        "tokenizer.chat_template",
        "general.file_type",
    ],
)
def test_dropped_key(converted: Path, tiny_dir: Path, tmp_path: Path, key: str) -> None:
    bad = rewrite(converted, tmp_path / "drop.gguf", drop_keys=(key,))
    assert _refused(bad, tiny_dir) == "metadata_missing"


@pytest.mark.parametrize(
    "change",
    [
        ("qwen3.rope.freq_base", 10000.0, V.FLOAT32, None),
        ("qwen3.attention.key_length", 16, V.UINT32, None),
        ("qwen3.block_count", 2, V.UINT64, None),
        ("qwen3.attention.layer_norm_rms_epsilon", 1e-5, V.FLOAT32, None),
        ("tokenizer.ggml.pre", "llama-bpe", V.STRING, None),
        ("tokenizer.ggml.eos_token_id", 1019, V.UINT32, None),
        ("tokenizer.ggml.add_bos_token", True, V.BOOL, None),
        ("general.file_type", 1, V.UINT32, None),
        ("tokenizer.ggml.token_type", [1] * 1024, V.ARRAY, V.INT32),
    ],
    ids=["rope", "key-length", "wrong-int-type", "eps", "pre", "eos", "add-bos", "ftype", "types"],
)
def test_wrong_value(
    converted: Path, tiny_dir: Path, tmp_path: Path, change: tuple[str, Any, V, V | None]
) -> None:
    key, value, vtype, sub = change
    bad = rewrite(converted, tmp_path / "set.gguf", set_keys={key: (value, vtype, sub)})
    assert _refused(bad, tiny_dir) == "metadata_mismatch"


def test_unexpected_key(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    bad = rewrite(
        converted, tmp_path / "extra.gguf", set_keys={"general.name": ("x", V.STRING, None)}
    )
    assert _refused(bad, tiny_dir) == "metadata_unexpected"


def test_missing_tensor(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    bad = rewrite(converted, tmp_path / "drop.gguf", drop_tensors=("blk.1.attn_k_norm.weight",))
    assert _refused(bad, tiny_dir) == "tensor_missing"


def test_extra_tensor(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    extra = {"output.weight": np.zeros((1024, 64), dtype=np.float32)}
    bad = rewrite(converted, tmp_path / "add.gguf", add_tensors=extra)
    assert _refused(bad, tiny_dir) == "tensor_unexpected"


def test_wrong_shape(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    reader = gguf.GGUFReader(converted)
    norm = next(t for t in reader.tensors if t.name == "output_norm.weight")
    reshaped = np.array(norm.data).reshape(2, 32)
    bad = rewrite(converted, tmp_path / "shape.gguf", replace_tensors={norm.name: reshaped})
    assert _refused(bad, tiny_dir) == "tensor_shape_mismatch"


def test_wrong_storage_type(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    reader = gguf.GGUFReader(converted)
    norm = next(t for t in reader.tensors if t.name == "output_norm.weight")
    as_f16 = np.array(norm.data).astype(np.float16)
    bad = rewrite(converted, tmp_path / "f16.gguf", replace_tensors={norm.name: as_f16})
    assert _refused(bad, tiny_dir) == "tensor_dtype_mismatch"


def test_file_of_other_outtype(converted: Path, tiny_dir: Path) -> None:
    assert _refused(converted, tiny_dir, "f16") == "metadata_mismatch"


def test_digest_mismatch(converted: Path, tiny_dir: Path) -> None:
    assert _refused(converted, tiny_dir, sha="0" * 64) == "digest_mismatch"


@pytest.mark.parametrize("keep", [0, 10, 2000], ids=["empty", "magic", "mid-metadata"])
def test_truncated_file_unreadable(
    converted: Path, tiny_dir: Path, tmp_path: Path, keep: int
) -> None:
    path = tmp_path / "cut.gguf"
    path.write_bytes(converted.read_bytes()[:keep])
    assert _refused(path, tiny_dir) == "gguf_unreadable"


def test_not_a_gguf(tiny_dir: Path) -> None:
    assert _refused(tiny_dir / "model.safetensors", tiny_dir) == "gguf_unreadable"


def test_source_unreadable(converted: Path, tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "model.safetensors").unlink()
    assert _refused(converted, root) == "source_unreadable"


def test_source_config_lacks_field(converted: Path, tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    edit_json(root / "config.json", lambda c: c.pop("max_position_embeddings"))
    assert _refused(converted, root) == "source_unreadable"


def test_source_differs_from_converted(converted: Path, llama_dir: Path) -> None:
    assert _refused(converted, llama_dir) == "metadata_missing"  # llama.* keys absent


def test_permutation_rows_match_reshape_formulation() -> None:
    """The verifier's index formula equals llama.cpp's reshape/swapaxes permutation."""
    for heads, head_dim in ((4, 16), (2, 32), (8, 8)):
        rows = heads * head_dim
        reference = np.arange(rows).reshape(heads, 2, head_dim // 2).swapaxes(1, 2).reshape(rows)
        assert np.array_equal(permutation_rows(rows, heads), reference)


def test_config_field_missing_when_deriving_expectations(tiny_dir: Path) -> None:
    """The config is re-read for expectations; if it lost a field since, refuse."""
    plan = plan_conversion(tiny_dir, "f32")
    with pytest.raises(VerifyError) as info:
        expected_metadata({"model_type": "qwen3"}, plan)
    assert info.value.category == "source_unreadable"


def test_source_tensor_unreadable_while_comparing(
    tiny_dir: Path, copy_of: Copy, converted: Path
) -> None:
    """The source shrank after planning: the data comparison refuses, never guesses."""
    root = copy_of(tiny_dir)
    plan = plan_conversion(root, "q8_0")
    weights = root / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(VerifyError) as info:
        check_tensors(gguf.GGUFReader(converted), plan)
    assert info.value.category == "source_unreadable"


@pytest.mark.parametrize("dtype", ["BF16", "F16"])
def test_same_type_encoding_is_identity_except_nan(dtype: str) -> None:
    """The claim behind the stored-bytes comparison, on all 65,536 bit patterns:
    ``gguf.quants`` gives back every non-NaN pattern, and ``has_nan`` names exactly
    the NaNs (alone and in one array)."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    stored = bits.view(DTYPES[dtype][1])  # as the verifier reads them: BF16 as bits
    widened = widen(stored, dtype)
    nan = np.isnan(widened)
    qtype = IDENTITY_EXCEPT_NAN[dtype]
    encoded = np.asarray(gguf.quants.quantize(widened, qtype)).reshape(-1).view(np.uint16)
    assert np.array_equal(encoded[~nan], bits[~nan])
    assert [has_nan(stored[i : i + 1], dtype) for i in range(bits.size)] == nan.tolist()
    assert not has_nan(stored[~nan], dtype)
    assert has_nan(stored, dtype)


def test_f32_encoding_is_identity() -> None:
    """F32 -> F32 is ``astype(float32)``: every bit pattern, NaN payloads included."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, size=1 << 16, dtype=np.uint32)
    specials = [0x7F800001, 0x7FC00000, 0xFF800001, 0x80000000, 0x00000001, 0x7F800000]
    bits[: len(specials)] = specials
    encoded = np.asarray(gguf.quants.quantize(bits.view(np.float32), IDENTITY_EXCEPT_NAN["F32"]))
    assert np.array_equal(encoded.view(np.uint32), bits)
    assert not has_nan(bits.view(np.float32), "F32")  # F32 never takes the NaN detour


@pytest.mark.parametrize("outtype", ["bf16", "f16", "f32"])
def test_corrupt_tensor_byte_every_outtype(tiny_dir: Path, tmp_path: Path, outtype: Any) -> None:
    """bf16 from a bf16 source is compared as stored bytes; one flipped bit is still found
    (in the middle of a sliced tensor, and in the last byte of the file)."""
    good = convert(tiny_dir, tmp_path / "good", outtype).path
    verify_gguf(good, tiny_dir, outtype)
    tensors = gguf.GGUFReader(good).tensors
    embd = next(t for t in tensors if t.name == "token_embd.weight")
    last = max(tensors, key=lambda t: int(t.data_offset))
    for where in (
        int(embd.data_offset) + int(embd.n_bytes) // 2,
        int(last.data_offset) + int(last.n_bytes) - 1,
    ):
        bad = tmp_path / f"bad-{where}.gguf"
        data = bytearray(good.read_bytes())
        data[where] ^= 0x01
        bad.write_bytes(bytes(data))
        with pytest.raises(VerifyError) as info:
            check_tensors(gguf.GGUFReader(bad), plan_conversion(tiny_dir, outtype), chunk_bytes=700)
        assert info.value.category == "tensor_data_mismatch"
        assert _refused(bad, tiny_dir, outtype) == "tensor_data_mismatch"


def test_unquieted_nan_copied_as_stored_is_refused(
    copy_of: Copy, llama_dir: Path, tmp_path: Path
) -> None:
    """A converter that copied a signalling BF16 NaN as stored (ggml sets its quiet bit)
    wrote different bytes than the declared conversion: the stored-bytes shortcut must
    not accept them just because they equal the source's."""
    source = copy_of(llama_dir)
    plant_signalling_nans(source)
    good = convert(source, tmp_path / "good", "bf16").path
    verify_gguf(good, source, "bf16")
    embd = next(t for t in gguf.GGUFReader(good).tensors if t.name == "token_embd.weight")
    data = bytearray(good.read_bytes())
    start = int(embd.data_offset) + 10
    assert bytes(data[start : start + 4]) == np.array([0x7FC1, 0xFFC1], "<u2").tobytes()
    data[start : start + 4] = SIGNALLING_BF16_NANS.tobytes()
    bad = tmp_path / "unquieted.gguf"
    bad.write_bytes(bytes(data))
    assert _refused(bad, source, "bf16") == "tensor_data_mismatch"


def test_digest_is_of_the_whole_file(converted: Path, tiny_dir: Path) -> None:
    """The one-pass digest covers the header, every tensor and what lies between them
    (the reader's own gap handling is tested below): equal to hashlib's of the file."""
    report = verify_gguf(converted, tiny_dir, "q8_0")
    assert report.sha256 == hashlib.sha256(converted.read_bytes()).hexdigest()
    assert report.size == converted.stat().st_size


def test_hashing_reader_overlapping_and_short_reads(tmp_path: Path) -> None:
    """Reads behind the hashed offset are served, not hashed twice; reads past the end
    are short; the digest is always of the file, once, in order."""
    path = tmp_path / "f"
    content = bytes(range(256)) * 1000
    path.write_bytes(content)
    with open_hashing(path) as reading:
        assert reading.read(1000, 10) == content[1000:1010]
        assert reading.read(500, 600) == content[500:1100]  # behind: not hashed again
        assert reading.read(len(content) - 5, 100) == content[-5:]
        assert reading.read(len(content) + 10, 4) == b""
        assert reading.finish() == (hashlib.sha256(content).hexdigest(), len(content))


def test_hashing_reader_finish_hashes_what_was_not_read(tmp_path: Path) -> None:
    """A file whose last bytes no tensor covers (trailing padding, appended data) is
    still hashed to its end: the digest is of the file, not of what was compared."""
    path = tmp_path / "f"
    content = os.urandom(3 * 1024 * 1024 + 17)
    path.write_bytes(content)
    with open_hashing(path) as reading:
        assert reading.read(100, 10) == content[100:110]
        assert reading.finish() == (hashlib.sha256(content).hexdigest(), len(content))


def test_refusals_name_the_key_or_tensor(converted: Path, tiny_dir: Path, tmp_path: Path) -> None:
    """The subject is for the operator's terminal: which key or tensor failed."""
    cases = [
        (
            rewrite(converted, tmp_path / "a.gguf", drop_keys=("tokenizer.ggml.pre",)),
            ("metadata_missing", "tokenizer.ggml.pre"),
        ),
        (
            rewrite(converted, tmp_path / "b.gguf", drop_tensors=("blk.1.attn_k_norm.weight",)),
            ("tensor_missing", "blk.1.attn_k_norm.weight"),
        ),
    ]
    corrupt = tmp_path / "c.gguf"
    shutil.copy(converted, corrupt)
    tensor = next(t for t in gguf.GGUFReader(converted).tensors if t.name == "blk.1.ffn_up.weight")
    with corrupt.open("r+b") as handle:
        handle.seek(tensor.data_offset + 100)
        byte = handle.read(1)
        handle.seek(tensor.data_offset + 100)
        handle.write(bytes([byte[0] ^ 0x01]))
    cases.append((corrupt, ("tensor_data_mismatch", "blk.1.ffn_up.weight")))
    for path, expected in cases:
        with pytest.raises(VerifyError) as info:
            verify_gguf(path, tiny_dir, "q8_0")
        assert (info.value.category, info.value.subject) == expected


def test_q8_0_blocks_run_along_the_last_axis() -> None:
    """Q8_0 packs 32 values of a row (the last axis, GGUF's innermost) per block: a
    tensor whose rows do not fill whole blocks is stored F16, whatever its other axes;
    1-D tensors are F32 at every outtype."""
    assert storage_type((2, 64, 48), "q8_0") == Q.F16
    assert storage_type((2, 48, 64), "q8_0") == Q.Q8_0
    assert storage_type((48, 64), "q8_0") == Q.Q8_0
    assert storage_type((64,), "q8_0") == Q.F32
    assert storage_type((2, 64, 48), "bf16") == Q.BF16


def test_rope_theta_defaults_to_transformers_default(tiny_dir: Path) -> None:
    """A config without ``rope_theta`` (nor ``rope_parameters``) means transformers'
    default base, 10000: the expected ``rope.freq_base`` is that, not a guess."""
    plan = plan_conversion(tiny_dir, "f32")
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["rope_theta"] != 10000.0  # the tiny Qwen3's own base is another
    config.pop("rope_theta")
    config.pop("rope_parameters", None)
    types, value = expected_metadata(config, plan)["qwen3.rope.freq_base"]
    assert (types, value) == ([V.FLOAT32], np.float32(10000.0))
    config["rope_parameters"] = {"rope_theta": 5e5}
    assert expected_metadata(config, plan)["qwen3.rope.freq_base"][1] == np.float32(5e5)


def test_a_verify_report_cannot_be_changed(converted: Path, tiny_dir: Path) -> None:
    """The report's digest is what the cache records and a receipt carries: it is
    immutable once made."""
    report = verify_gguf(converted, tiny_dir, "q8_0")
    assert isinstance(report, VerifyReport)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.sha256 = "0" * 64  # type: ignore[misc]


@pytest.mark.parametrize("dtype", ["BF16", "F16"])
def test_an_empty_slice_has_no_nan(dtype: str) -> None:
    """A slice of no values (a tensor with a zero dimension) holds no NaN, and asking
    does not fail on the maximum of nothing."""
    assert has_nan(np.empty(0, dtype=np.uint16), dtype) is False
    assert has_nan(np.empty((0, 64), dtype=np.uint16), dtype) is False
