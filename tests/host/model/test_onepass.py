"""One pass over the source: each shard hashed in the reads that convert it,
the GGUF checked as it is written, and every refusal still a named pin or data refusal.

Real checkpoints (the synthesized tiny Qwen3 and its mixed-dtype variant), the real
converter and cache; the only instrument is a counting subclass of ``HashedSource``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import gguf
import pytest

import host.model.convert as convert_module
from host.model.cache import prepare_model
from host.model.categories import PinError, VerifyError
from host.model.convert import plan_conversion
from host.model.pins import ExpectedArchitecture, pins_of
from host.model.safetensors_header import parse_header
from host.model.verify_gguf import InWriteCheck, verify_gguf
from tests.host.model.divergence_cases import mixed_dtypes
from tests.host.model.helpers import Counting

QWEN3 = ExpectedArchitecture(("Qwen3ForCausalLM",), "qwen3")
Copy = Callable[[Path], Path]
WEIGHTS = "model.safetensors"


def test_each_shard_is_read_once_and_hashed_in_that_read(
    tmp_path: Path, tiny_dir: Path, counting: tuple[list[Counting], list[str]]
) -> None:
    """Every byte of the weights is read once, by the converter, and that read is the
    one hashed: nothing read only to hash, nothing converted unhashed, and the file is
    never hashed apart. The GGUF equals what the read-back verifier accepts.
    Mutation control: re-verifying every shard after the pass (``again`` listing all
    shards) hashes the weights apart and this test fails."""
    opened, hashed = counting
    size = (tiny_dir / WEIGHTS).stat().st_size
    pins = pins_of(tiny_dir)
    hashed.clear()  # pins_of hashed every file, as `harness model pin` does
    result = prepare_model(tiny_dir, pins, "bf16", expected=QWEN3, cache_root=tmp_path)
    hashed_now = list(hashed)
    assert [s.name for s in opened] == [WEIGHTS]
    source = opened[0]
    assert source.requested == size  # header + every tensor, once
    assert (source.hash_only_bytes, source.unhashed_bytes) == (0, 0)
    assert WEIGHTS not in hashed_now
    report = verify_gguf(result.gguf_path, tiny_dir, "bf16", expected_sha256=result.sha256)
    assert report.sha256 == hashlib.sha256(result.gguf_path.read_bytes()).hexdigest()
    assert result.times is not None and result.provenance == "built_by_this_run"


def test_a_shard_out_of_name_order_is_hashed_again_whole(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, counting: tuple[list[Counting], list[str]]
) -> None:
    """Mixed dtypes: the writer groups F32 first, the converter reads in name order, so
    some converted bytes are not the hashed buffers; the shard is then hashed again
    whole after the pass (the honest fallback), and the output is still right.
    Mutation control: dropping the shards whose ``converted_is_hashed`` is False from
    the re-check leaves ``sha256_file`` unused and this test fails."""
    opened, hashed = counting
    root = copy_of(tiny_dir)
    mixed_dtypes(root)
    pins = pins_of(root)
    hashed.clear()  # pins_of hashed every file, as `harness model pin` does
    result = prepare_model(root, pins, "bf16", cache_root=tmp_path / "c")
    source = opened[0]
    assert not source.converted_is_hashed and source.unhashed_bytes > 0
    assert hashed.count(WEIGHTS) == 1  # the re-check after the pass
    verify_gguf(result.gguf_path, root, "bf16", expected_sha256=result.sha256)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_changed_tensor_byte_is_the_pin_refusal_naming_the_shard(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy
) -> None:
    """A byte of tensor data changed after pinning (same size): the digest of the one
    pass differs from the pin, the refusal is ``digest_mismatch`` naming the shard, and
    no entry is left. Mutation control: without ``_compare_shards`` after the write the
    changed weights become a cache entry and this test fails."""
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    _flip(root / WEIGHTS, (root / WEIGHTS).stat().st_size - 3)
    with pytest.raises(PinError) as info:
        prepare_model(root, pins, "bf16", cache_root=tmp_path / "c")
    assert (info.value.category, info.value.subject) == ("digest_mismatch", WEIGHTS)
    assert [p for p in (tmp_path / "c").iterdir() if not p.name.endswith(".lock")] == []


def test_a_changed_header_is_the_pin_refusal_not_a_conversion_refusal(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy
) -> None:
    """A header byte changed after pinning so the header no longer parses: the shard
    is not the pinned one, and that is what the operator is told (the pin refusal), not
    ``source_header_invalid``. Mutation control: without the comparison in the
    refusal path the ConvertError escapes and this test fails."""
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    _flip(root / WEIGHTS, 8)  # the header's opening brace
    with pytest.raises(PinError) as info:
        prepare_model(root, pins, "bf16", cache_root=tmp_path / "c")
    assert (info.value.category, info.value.subject) == ("digest_mismatch", WEIGHTS)


def test_a_tensor_written_at_another_offset_is_refused(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A converter that pads one alignment too many before the data puts every tensor
    after the offset its header names: the in-write check and the header read back
    disagree, ``tensor_data_mismatch``. Mutation control: without the offset
    comparison in ``verify_written`` the misplaced file is cached and this test fails."""
    real = convert_module._pad
    calls = {"n": 0}

    def pad_wrong(sink: convert_module.HashingFile, alignment: int) -> None:
        real(sink, alignment)
        calls["n"] += 1
        if calls["n"] == 1:
            sink.write_nowait(b"\0" * alignment)

    monkeypatch.setattr(convert_module, "_pad", pad_wrong)
    with pytest.raises(VerifyError) as info:
        prepare_model(tiny_dir, pins_of(tiny_dir), "bf16", cache_root=tmp_path / "c")
    assert info.value.category == "tensor_data_mismatch"


def test_an_encoded_tensor_that_differs_is_refused_while_written(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """q8_0 goes through the encoder: one wrong byte of one encoded chunk is caught by
    the in-write comparison with the verifier's own encoding, naming the tensor.
    Mutation control: with ``InWriteCheck.chunk``'s ``out != expected`` made False it is cached
    and this test fails."""
    real = convert_module.encode
    done = {"hit": False}

    def wrong(values: object, qtype: gguf.GGMLQuantizationType) -> object:
        data = real(values, qtype).copy()  # type: ignore[arg-type]
        if not done["hit"] and qtype == gguf.GGMLQuantizationType.Q8_0:
            data[-1] ^= 0x01
            done["hit"] = True
        return data

    monkeypatch.setattr(convert_module, "encode", wrong)
    with pytest.raises(VerifyError) as info:
        prepare_model(tiny_dir, pins_of(tiny_dir), "q8_0", cache_root=tmp_path / "c")
    assert info.value.category == "tensor_data_mismatch" and info.value.subject


def test_a_chunk_from_the_wrong_span_is_refused(tiny_dir: Path) -> None:
    """The in-write check knows each tensor's span in its shard: a chunk that does not
    start where the last one ended (a converter reading the wrong offset) is refused.
    Mutation control: without the source-offset test this test fails."""
    plan = plan_conversion(tiny_dir, "bf16")
    tensor = next(t for t in plan.tensors if len(t.shape) == 2)
    header = parse_header(tiny_dir / WEIGHTS)
    assert header.tensors  # the plan's spans come from this header
    data = (tiny_dir / WEIGHTS).read_bytes()[tensor.entry.begin + 2 : tensor.entry.end]
    check = InWriteCheck(plan)
    check.begin(tensor, 0)
    with pytest.raises(VerifyError) as info:
        check.chunk(tensor.entry.begin + 2, data, data)
    assert (info.value.category, info.value.subject) == ("tensor_data_mismatch", tensor.name)
