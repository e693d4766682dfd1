"""Pin-table verification: the tree is exactly the pinned files, and the config fits."""

from __future__ import annotations

import importlib.machinery
import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from host.model.categories import PinError
from host.model.pins import (
    IMPORTABLE_SUFFIXES,
    ExpectedArchitecture,
    Pin,
    pins_of,
    table_digest,
    verify_source,
)

QWEN3 = ExpectedArchitecture(("Qwen3ForCausalLM",), "qwen3", (("hidden_size", 64),))

Copy = Callable[[Path], Path]


def _refused(root: Path, pins: list[Pin], expected: ExpectedArchitecture | None = None) -> str:
    with pytest.raises(PinError) as info:
        verify_source(root, pins, expected)
    return info.value.category


def test_pinned_tree_verifies(tiny_dir: Path) -> None:
    pins = pins_of(tiny_dir)
    report = verify_source(tiny_dir, pins, QWEN3)
    assert [p.name for p in report.pins] == sorted(p.name for p in pins)
    assert report.table_digest == table_digest(reversed(pins))
    assert len(report.table_digest) == 64


def test_table_digest_changes_with_any_pin(tiny_dir: Path) -> None:
    pins = pins_of(tiny_dir)
    changed = [replace(pins[0], size=pins[0].size + 1), *pins[1:]]
    assert table_digest(pins) != table_digest(changed)


def test_unlisted_file(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / "README.md").write_text("hello")
    assert _refused(root, pins) == "unlisted_file"


def test_unlisted_file_in_subdirectory(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / "sub").mkdir()
    (root / "sub" / "notes.txt").write_text("x")
    assert _refused(root, pins) == "unlisted_file"


@pytest.mark.parametrize("suffix", IMPORTABLE_SUFFIXES)
def test_unlisted_importable_file_every_suffix(tiny_dir: Path, copy_of: Copy, suffix: str) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / f"modeling_evil{suffix}").write_bytes(b"x")
    assert _refused(root, pins) == "unlisted_importable_file"


def test_importable_suffixes_cover_importlib() -> None:
    machinery = importlib.machinery
    for suffix in (
        machinery.SOURCE_SUFFIXES + machinery.BYTECODE_SUFFIXES + machinery.EXTENSION_SUFFIXES
    ):
        assert suffix in IMPORTABLE_SUFFIXES


def test_pinned_importable_file_is_allowed(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "configuration.py").write_text("X = 1\n")
    verify_source(root, pins_of(root))


def test_pycache_refused_even_if_empty(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    assert _refused(root, pins) == "pycache_present"


def test_missing_file(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / "tokenizer_config.json").unlink()
    assert _refused(root, pins) == "missing_file"


def test_wrong_size(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    with (root / "model.safetensors").open("ab") as handle:
        handle.write(b"\0")
    assert _refused(root, pins) == "size_mismatch"


def test_wrong_digest_same_size(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    path = root / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    assert _refused(root, pins) == "digest_mismatch"


def test_wrong_digest_in_config(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    path = root / "config.json"
    path.write_bytes(path.read_bytes().replace(b'"hidden_size": 64', b'"hidden_size": 65'))
    assert _refused(root, pins) == "digest_mismatch"


def test_symlinked_file(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    target = root.parent / "elsewhere.json"
    (root / "tokenizer_config.json").rename(target)
    os.symlink(target, root / "tokenizer_config.json")
    assert _refused(root, pins) == "symlink_absolute"


def test_symlinked_root(tiny_dir: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    os.symlink(tiny_dir, link)
    assert _refused(link, pins_of(tiny_dir)) == "symlink"


def test_fifo_is_not_a_regular_file(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    os.mkfifo(root / "pipe")
    assert _refused(root, pins) == "not_regular_file"


def test_source_not_directory(tmp_path: Path, tiny_dir: Path) -> None:
    assert _refused(tmp_path / "absent", pins_of(tiny_dir)) == "source_not_directory"


@pytest.mark.parametrize(
    "bad",
    [
        Pin("../config.json", 1, "0" * 64),
        Pin("/etc/passwd", 1, "0" * 64),
        Pin("a//b", 1, "0" * 64),
        Pin("config.json", -1, "0" * 64),
        Pin("config.json", 1, "0" * 63),
        Pin("config.json", 1, "G" * 64),
    ],
    ids=["dotdot", "absolute", "empty-part", "negative", "short-digest", "bad-digest"],
)
def test_invalid_pin_table(tiny_dir: Path, bad: Pin) -> None:
    assert _refused(tiny_dir, [bad]) == "pin_table_invalid"


def test_duplicate_and_empty_tables(tiny_dir: Path) -> None:
    pins = pins_of(tiny_dir)
    assert _refused(tiny_dir, [*pins, pins[0]]) == "pin_table_invalid"
    assert _refused(tiny_dir, []) == "pin_table_invalid"


def test_architecture_contradiction(tiny_dir: Path, llama_dir: Path) -> None:
    assert _refused(llama_dir, pins_of(llama_dir), QWEN3) == "config_architecture_mismatch"
    other_head = ExpectedArchitecture(("Qwen3ForSequenceClassification",), "qwen3")
    assert _refused(tiny_dir, pins_of(tiny_dir), other_head) == "config_architecture_mismatch"
    wrong_type = ExpectedArchitecture(("Qwen3ForCausalLM",), "llama")
    assert _refused(tiny_dir, pins_of(tiny_dir), wrong_type) == "config_architecture_mismatch"
    wrong_field = ExpectedArchitecture(("Qwen3ForCausalLM",), "qwen3", (("hidden_size", 2560),))
    assert _refused(tiny_dir, pins_of(tiny_dir), wrong_field) == "config_architecture_mismatch"
    absent_field = ExpectedArchitecture(("Qwen3ForCausalLM",), "qwen3", (("layer_types", []),))
    assert _refused(tiny_dir, pins_of(tiny_dir), absent_field) == "config_architecture_mismatch"


def test_config_unreadable(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "config.json").write_text("[not an object]")
    assert _refused(root, pins_of(root), QWEN3) == "config_unreadable"
    (root / "config.json").write_text(json.dumps(["list"]))
    assert _refused(root, pins_of(root), QWEN3) == "config_unreadable"


def test_expectation_without_pinned_config(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "config.json").unlink()
    assert _refused(root, pins_of(root), QWEN3) == "config_unreadable"


def test_pins_of_refuses_pycache(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    (root / "__pycache__").mkdir()
    with pytest.raises(PinError) as info:
        pins_of(root)
    assert info.value.category == "pycache_present"


def test_refusal_text_escapes_a_hostile_file_name(tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / "notes\x1b[2J.txt").write_text("x")
    with pytest.raises(PinError) as info:
        verify_source(root, pins)
    assert info.value.subject == "notes\x1b[2J.txt"  # the exact name, for code
    assert str(info.value) == "unlisted_file: notes\\x1b[2J.txt"  # what a terminal gets


def test_an_empty_pinned_file_is_a_valid_pin(tiny_dir: Path, copy_of: Copy) -> None:
    """Size 0 is a real file's size (an empty `added_tokens.json`); only a negative size is
    refused as a malformed table."""
    root = copy_of(tiny_dir)
    (root / "added_tokens.json").write_bytes(b"")
    pins = pins_of(root)
    assert [pin.size for pin in pins if pin.name == "added_tokens.json"] == [0]
    verify_source(root, pins)


@pytest.mark.parametrize("walk", ["verify_source", "pins_of"])
def test_a_pycache_refusal_names_the_first_in_sorted_order(
    tiny_dir: Path, copy_of: Copy, walk: str
) -> None:
    """Two runs over the same tree name the same `__pycache__` (the operator's terminal
    says which to remove), whichever the directory walk meets first."""
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    for parent in ("b", "a", "c"):
        (root / parent / "__pycache__").mkdir(parents=True)
    with pytest.raises(PinError) as info:
        if walk == "verify_source":
            verify_source(root, pins)
        else:
            pins_of(root)
    assert info.value.category == "pycache_present"
    assert info.value.subject == "a/__pycache__"
