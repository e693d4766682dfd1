"""The check made while a GGUF is written (``InWriteCheck``) and its header read-back
(``verify_written``), driven chunk by chunk with the tiny checkpoints' real bytes.

Why apart from test_onepass: those tests run the converter, which only ever hands the
check correct chunks (or one wrong byte of an encoded one). A converter with a bug
hands it anything; each refusal here is one such chunk, and each would pass unnoticed
if that part of the check were gone (each found by mutation).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

from host.model.cache import prepare_model
from host.model.categories import OutType, VerifyError
from host.model.convert import ConversionPlan, TensorPlan, plan_conversion
from host.model.pins import ExpectedArchitecture, pins_of
from host.model.verify_gguf import InWriteCheck, permutation_rows, verify_gguf, verify_written
from host.model.vocab import load_json_object
from tests.host.model.helpers import plant_signalling_nans, stored_bytes

LLAMA = ExpectedArchitecture(("LlamaForCausalLM",), "llama")


def _tensor(plan: ConversionPlan, suffix: str) -> TensorPlan:
    return next(t for t in plan.tensors if t.name.endswith(suffix))


def _refused(check: InWriteCheck, source_offset: int, source: object, written: object) -> str:
    with pytest.raises(VerifyError) as info:
        check.chunk(source_offset, source, written)
    assert info.value.category == "tensor_data_mismatch"
    return str(info.value.subject)


@pytest.mark.parametrize("outtype", ["bf16", "q8_0"])
def test_a_llama_model_passes_with_its_q_and_k_rows_permuted(
    tmp_path: Path, llama_dir: Path, outtype: OutType
) -> None:
    """Llama's q/k weights are written with their rows permuted (llama.cpp's rotary
    layout): the in-write check permutes the source the same way, whole tensor at a
    time, and the result is what the read-back verifier accepts. The k weight has fewer
    rows than columns (2 kv heads of 4), so a permutation sized by the wrong axis fails."""
    result = prepare_model(
        llama_dir,
        pins_of(llama_dir),
        outtype,
        expected=LLAMA,
        cache_root=tmp_path,
    )
    verify_gguf(result.gguf_path, llama_dir, outtype, expected_sha256=result.sha256)


def test_a_signalling_nan_is_checked_against_its_quieted_encoding(
    tmp_path: Path, llama_dir: Path, copy_of: Callable[[Path], Path]
) -> None:
    """A BF16 signalling NaN cannot be copied as stored (ggml sets its quiet bit): the
    converter encodes that slice, and the in-write check expects the encoding for a
    slice with a NaN, not the stored bytes. The model is cached and verifies."""
    source = copy_of(llama_dir)
    plant_signalling_nans(source)
    result = prepare_model(source, pins_of(source), "bf16", expected=LLAMA, cache_root=tmp_path)
    verify_gguf(result.gguf_path, source, "bf16", expected_sha256=result.sha256)


def test_q_rows_written_unpermuted_are_refused(llama_dir: Path) -> None:
    """A converter that forgot the permutation writes the stored bytes of a q weight
    as they are: same storage type, right size, wrong row order. Refused."""
    plan = plan_conversion(llama_dir, "bf16")
    tensor = _tensor(plan, "blk.0.attn_q.weight")
    data = stored_bytes(tensor)
    check = InWriteCheck(plan)
    check.begin(tensor, 0)
    assert _refused(check, tensor.entry.begin, data, bytes(data)) == tensor.name


def test_q_rows_permuted_are_accepted_whole_and_refused_in_part(llama_dir: Path) -> None:
    """The permutation moves rows across the whole tensor, so a q/k chunk must be the
    whole tensor: the permuted whole passes; half of it, even permuted right, is refused."""
    plan = plan_conversion(llama_dir, "bf16")
    tensor = _tensor(plan, "blk.0.attn_k.weight")
    data = stored_bytes(tensor)
    rows = np.frombuffer(data, dtype=np.uint16).reshape(tensor.shape)
    permuted = rows[permutation_rows(rows.shape[0], plan.hparams.kv_heads)].tobytes()
    check = InWriteCheck(plan)
    check.begin(tensor, 0)
    check.chunk(tensor.entry.begin, data, permuted)
    check.end(len(permuted))
    assert check.written[tensor.name] == (0, len(permuted))

    half = len(data) // 2
    partial = InWriteCheck(plan)
    partial.begin(tensor, 0)
    assert _refused(partial, tensor.entry.begin, data[:half], permuted[:half]) == tensor.name


def test_a_same_type_chunk_that_is_a_changed_copy_is_refused(tiny_dir: Path) -> None:
    """Only the very buffer that was read skips the comparison: a copy of it with one
    byte changed (same storage type, no permutation) is compared and refused."""
    plan = plan_conversion(tiny_dir, "bf16")
    tensor = next(t for t in plan.tensors if len(t.shape) == 2)
    data = stored_bytes(tensor)
    changed = bytearray(data)
    changed[5] ^= 0x01
    check = InWriteCheck(plan)
    check.begin(tensor, 0)
    assert _refused(check, tensor.entry.begin, data, changed) == tensor.name


def test_the_source_buffer_written_as_is_for_another_storage_type_is_refused(
    tiny_dir: Path,
) -> None:
    """At q8_0 a weight must be encoded: writing the BF16 buffer that was read (the
    same object) is refused at that chunk, not left to the size check at its end."""
    plan = plan_conversion(tiny_dir, "q8_0")
    tensor = next(t for t in plan.tensors if t.qtype == gguf.GGMLQuantizationType.Q8_0)
    data = stored_bytes(tensor)
    check = InWriteCheck(plan)
    check.begin(tensor, 0)
    assert _refused(check, tensor.entry.begin, data, data) == tensor.name


def _written_whole(plan: ConversionPlan, tensor: TensorPlan, start: int) -> InWriteCheck:
    check = InWriteCheck(plan)
    data = stored_bytes(tensor)
    check.begin(tensor, start)
    check.chunk(tensor.entry.begin, data, data)  # the buffer read, written as is
    return check


@pytest.mark.parametrize("cut", [1, 2, 6])
def test_a_chunk_of_part_of_a_row_is_refused_by_name(tiny_dir: Path, cut: int) -> None:
    """A converter that hands over a chunk ending inside a value (1 byte of a BF16) or
    inside a row is refused as a data mismatch naming the tensor, never a numpy error
    (every failure has a name)."""
    plan = plan_conversion(tiny_dir, "q8_0")
    tensor = next(t for t in plan.tensors if t.qtype == gguf.GGMLQuantizationType.Q8_0)
    data = stored_bytes(tensor)
    check = InWriteCheck(plan)
    check.begin(tensor, 0)
    assert _refused(check, tensor.entry.begin, data[:cut], b"") == tensor.name


def test_a_tensor_ends_where_its_bytes_end(tiny_dir: Path) -> None:
    """``end`` refuses a tensor whose file offset moved by other than the bytes the
    check saw written (here the right size, 32 bytes of padding too many), one whose
    source was not all read, and a name written twice; the exact end is recorded."""
    plan = plan_conversion(tiny_dir, "bf16")
    tensor = next(t for t in plan.tensors if len(t.shape) == 2)
    size = tensor.entry.nbytes

    check = _written_whole(plan, tensor, 64)
    with pytest.raises(VerifyError) as info:
        check.end(64 + size + 32)
    assert (info.value.category, info.value.subject) == ("tensor_data_mismatch", tensor.name)

    short = InWriteCheck(plan)
    short.begin(tensor, 0)
    data = stored_bytes(tensor)
    part = data[: -2 * tensor.shape[-1]]  # one row short, the buffer read written as is
    short.chunk(tensor.entry.begin, part, part)
    with pytest.raises(VerifyError):
        short.end(len(part))

    again = _written_whole(plan, tensor, 64)
    again.end(64 + size)
    assert again.written == {tensor.name: (64, size)}
    again.begin(tensor, 64 + size)
    again.chunk(tensor.entry.begin, data, data)
    with pytest.raises(VerifyError):
        again.end(64 + 2 * size)


def _gguf(tmp_path: Path, tiny_dir: Path) -> tuple[Path, ConversionPlan, dict[str, object]]:
    result = prepare_model(tiny_dir, pins_of(tiny_dir), "bf16", cache_root=tmp_path / "c")
    copy = tmp_path / "model.gguf"
    shutil.copyfile(result.gguf_path, copy)
    return copy, plan_conversion(tiny_dir, "bf16"), load_json_object(tiny_dir / "config.json")


def _as_written(path: Path, plan: ConversionPlan) -> InWriteCheck:
    """A check whose record of what was written is what the file's header says."""
    check = InWriteCheck(plan)
    for tensor in gguf.GGUFReader(path).tensors:
        check.written[tensor.name] = (int(tensor.data_offset), int(tensor.n_bytes))
    return check


def test_verify_written_names_the_first_tensor_the_check_did_not_see(
    tmp_path: Path, tiny_dir: Path
) -> None:
    """The header lists tensors the check never saw written: refused, naming the first
    of them in name order (the same name on every run)."""
    path, plan, config = _gguf(tmp_path, tiny_dir)
    check = _as_written(path, plan)
    assert verify_written(path, config, plan, check) > 0
    names = sorted(check.written)
    for name in (names[3], names[1], names[-1]):
        del check.written[name]
    with pytest.raises(VerifyError) as info:
        verify_written(path, config, plan, check)
    assert (info.value.category, info.value.subject) == ("tensor_data_mismatch", names[1])


def _duplicate_key(path: Path) -> None:
    """Rename one metadata key to another of the same length, in place."""
    reader = gguf.GGUFReader(path)
    names = [n for n in reader.fields if not n.startswith("GGUF.")]
    first, second = next(
        (a, b) for i, a in enumerate(names) for b in names[i + 1 :] if len(a) == len(b)
    )
    data = path.read_bytes()
    assert data.count(second.encode()) == 1
    path.write_bytes(data.replace(second.encode(), first.encode()))


@pytest.mark.parametrize(
    ("damage", "raised"),
    [
        ("directory", OSError),
        ("duplicate_key", KeyError),
        ("cut_between_tensor_infos", IndexError),
        ("cut_in_the_version", ValueError),
    ],
)
def test_an_unreadable_header_is_gguf_unreadable_in_both_checks(
    tmp_path: Path, tiny_dir: Path, damage: str, raised: type[Exception]
) -> None:
    """What gguf's reader raises on a file it cannot read (OSError for a directory,
    KeyError for a key that appears twice, IndexError or ValueError for a header cut
    short) is the
    closed category ``gguf_unreadable`` in the read-back verifier and the in-write
    header check alike, never an exception of the reader's own."""
    path, plan, config = _gguf(tmp_path, tiny_dir)
    check = _as_written(path, plan)
    if damage == "directory":
        path.unlink()
        path.mkdir()
    elif damage == "duplicate_key":
        _duplicate_key(path)
    elif damage == "cut_in_the_version":
        path.write_bytes(path.read_bytes()[:6])  # the magic and half the version
    else:
        reader = gguf.GGUFReader(path)
        cut = int(reader.tensors[1].field.offset)  # the second tensor's info cut off whole
        del reader
        path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(raised):  # the reader's own exception, which each check must name
        gguf.GGUFReader(path)
    with pytest.raises(VerifyError) as written:
        verify_written(path, config, plan, check)
    with pytest.raises(VerifyError) as read_back:
        verify_gguf(path, tiny_dir, "bf16")
    assert written.value.category == read_back.value.category == "gguf_unreadable"
