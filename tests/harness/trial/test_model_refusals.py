"""What the operator is told when a snapshot is refused, at pin time and at prepare time.

Each case is a real damaged snapshot (the tiny Qwen3, split into shards where a case
needs it). `harness model pin` runs ``check_convertible`` before it writes a lock, so
pin refuses what prepare would; the refusal names the category, the underlying cause
and the file or tensor. Records keep the category alone.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.profiles.lock import lock_path, pin_snapshot
from harness.trial.modelstage import ModelStageError, check_convertible, prepare
from host.model.synth import safetensors_bytes, synthesize_tiny
from tests.host.model.helpers import Tensors, edit_json, edit_weights, load_tensors

QWEN4B = load_profile("qwen4b")


def _sharded(root: Path) -> None:
    """Split the tiny checkpoint into a.safetensors / b.safetensors plus an index."""
    tensors = load_tensors(root / "model.safetensors")
    names = sorted(tensors)
    weight_map: dict[str, str] = {}
    for shard, part in (("a.safetensors", names[:10]), ("b.safetensors", names[10:])):
        (root / shard).write_bytes(safetensors_bytes({n: tensors[n] for n in part}))
        weight_map.update(dict.fromkeys(part, shard))
    (root / "model.safetensors").unlink()
    index = {"metadata": {}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))


def _truncate(root: Path) -> None:
    _sharded(root)
    shard = root / "b.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])


def _drop_shard(root: Path) -> None:
    _sharded(root)
    (root / "b.safetensors").unlink()


def _shift_offsets(root: Path) -> None:
    """Every data offset in a.safetensors moved by 2 bytes: the first tensor's span
    no longer starts at 0."""
    _sharded(root)
    shard = root / "a.safetensors"
    data = shard.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    for name, entry in header.items():
        if name != "__metadata__":
            entry["data_offsets"] = [entry["data_offsets"][0] + 2, entry["data_offsets"][1] + 2]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    shard.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length :] + b"\0\0")


def _extra_tensor(root: Path) -> None:
    def add(t: Tensors) -> None:
        t["model.layers.0.mlp.extra.weight"] = t["model.norm.weight"]

    edit_weights(root, add)


def _config(**changes: object) -> Callable[[Path], None]:
    return lambda root: edit_json(root / "config.json", lambda c: c.update(changes))


CASES: list[tuple[str, Callable[[Path], None], str]] = [
    (
        "truncated-shard",
        _truncate,
        "conversion_failed: source_header_invalid/offsets_out_of_range (b.safetensors)",
    ),
    ("missing-shard", _drop_shard, "conversion_failed: weights_missing (b.safetensors)"),
    (
        "shifted-offsets",
        _shift_offsets,
        "conversion_failed: source_header_invalid/offsets_gap (a.safetensors)",
    ),
    (
        "unexpected-tensor",
        _extra_tensor,
        "conversion_failed: unexpected_tensor (model.layers.0.mlp.extra.weight)",
    ),
    (
        "mistral",
        _config(architectures=["MistralForCausalLM"], model_type="mistral"),
        "config_contradicts_profile: config_architecture_mismatch (config.json)",
    ),
    (
        "qwen2moe",
        _config(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe"),
        "config_contradicts_profile: config_architecture_mismatch (config.json)",
    ),
    (
        "scaled-rope",
        _config(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
        "conversion_failed: unsupported_config (config.json)",
    ),
    (
        "llama3-trailing-eos",
        lambda root: edit_json(
            root / "tokenizer.json",
            lambda t: t.__setitem__(
                "post_processor",
                {
                    "type": "TemplateProcessing",
                    "single": [
                        {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}},
                    ],
                    "pair": [],
                },
            ),
        ),
        "conversion_failed: unsupported_tokenizer (tokenizer.json)",
    ),
]


@pytest.mark.parametrize(
    ("damage", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_pin_refuses_what_prepare_would_and_says_which_file(
    tmp_path: Path, damage: Callable[[Path], None], expected: str
) -> None:
    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    damage(snapshot)
    locks = tmp_path / "profiles"
    locks.mkdir()
    with pytest.raises(ModelStageError) as info:
        pin_snapshot("qwen4b", snapshot, locks, check=lambda s: check_convertible(QWEN4B, s))
    assert info.value.refusal.describe() == expected
    assert not lock_path("qwen4b", locks).exists()  # no lock for a refused snapshot


def test_pin_accepts_a_convertible_snapshot(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    _sharded(snapshot)
    locks = tmp_path / "profiles"
    locks.mkdir()
    lock = pin_snapshot("qwen4b", snapshot, locks, check=lambda s: check_convertible(QWEN4B, s))
    assert len(lock.pins) == 6 and lock_path("qwen4b", locks).exists()


def test_prepare_names_the_file_a_conversion_refused(tmp_path: Path) -> None:
    """A lock written without the check (an older harness) over a snapshot with a
    truncated shard: prepare refuses, and says which shard and why."""
    locks = tmp_path / "profiles"
    locks.mkdir()
    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    _truncate(snapshot)
    pin_snapshot("qwen4b", snapshot, locks)
    prepared = prepare(QWEN4B, tmp_path / "cache", snapshot, locks)
    assert prepared.record.category == "conversion_failed"
    assert prepared.refusal is not None
    assert prepared.refusal.describe() == (
        "conversion_failed: source_header_invalid/offsets_out_of_range (b.safetensors)"
    )
    # the record carries the closed category and nothing that names the operator's file
    assert "b.safetensors" not in prepared.record.model_dump_json()


def test_every_verification_refusal_has_a_stage_category() -> None:
    from typing import get_args

    from harness.trial.modelstage import VERIFY_CATEGORY
    from host.model.categories import VerifyRefusal

    assert set(VERIFY_CATEGORY) == set(get_args(VerifyRefusal))
    assert VERIFY_CATEGORY["metadata_mismatch"] == "gguf_metadata_mismatch"
    assert VERIFY_CATEGORY["tensor_missing"] == "gguf_tensor_inventory_mismatch"
    assert VERIFY_CATEGORY["tensor_data_mismatch"] == "gguf_tensor_data_mismatch"


def test_every_symlink_refusal_is_recorded_as_pin_symlink() -> None:
    from typing import get_args

    from harness.trial.modelstage import _pin_category
    from host.model.categories import PinError, PinRefusal

    symlinks = [c for c in get_args(PinRefusal) if c.startswith("symlink")]
    assert len(symlinks) == 5
    for category in symlinks:
        assert _pin_category(PinError(category)) == "pin_symlink", category


def test_a_hostile_tensor_name_is_escaped_not_echoed(tmp_path: Path) -> None:
    """A checkpoint's tensor names reach the operator's terminal: control characters
    (here an ANSI sequence that would recolour or retitle it) are escaped."""
    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    hostile = "model.\x1b]0;pwned\x07\x1b[2Jx.weight"

    def add(t: Tensors) -> None:
        t[hostile] = t["model.norm.weight"]

    edit_weights(snapshot, add)
    with pytest.raises(ModelStageError) as info:
        check_convertible(QWEN4B, snapshot)
    line = info.value.refusal.describe()
    assert "\x1b" not in line and "\x07" not in line
    assert line == (
        "conversion_failed: unexpected_tensor (model.\\x1b]0;pwned\\x07\\x1b[2Jx.weight)"
    )
