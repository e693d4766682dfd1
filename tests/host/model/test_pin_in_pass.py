"""Pin and prepare in one pass (`harness model prepare --pin`): the pins are the
digests of the very reads that convert the snapshot, and every check a prepare against
earlier pins makes still holds.

Real synthesized checkpoints, the real converter and cache; the only instrument is the
counting ``HashedSource`` of test_onepass and a wrapper around ``write_gguf`` that
changes the snapshot while the pass runs (what a concurrent writer would do).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import host.model.cache as cache_module
import host.model.convert as convert_module
from host.model.cache import cache_key, pin_and_prepare, prepare_model
from host.model.categories import ConvertError, PinError
from host.model.pins import pins_of, table_digest
from host.model.sourcehash import HashedSource
from tests.host.model.divergence_cases import mixed_dtypes
from tests.host.model.helpers import Counting
from tests.host.model.test_onepass import QWEN3, WEIGHTS, Copy

WriteGguf = Callable[..., tuple[str, int]]


def _leftovers(root: Path) -> list[str]:
    """Entries and staging directories (an entry's kept fill lock is neither)."""
    return sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock"))


def _during_pass(monkeypatch: pytest.MonkeyPatch, change: Callable[[], object]) -> None:
    """Run *change* while the GGUF is written: after the first hashes, before the checks."""
    real: WriteGguf = convert_module.write_gguf

    def write_then_change(*args: Any, **kwargs: Any) -> tuple[str, int]:
        result = real(*args, **kwargs)
        change()
        return result

    monkeypatch.setattr(cache_module, "write_gguf", write_then_change)


def test_the_pins_are_pins_of_and_the_entry_is_prepares(
    tmp_path: Path, tiny_dir: Path, counting: tuple[list[Counting], list[str]]
) -> None:
    """One pass gives what `pin` then `prepare` give: the same pin table, the same key,
    the same GGUF bytes; and the weights are read once, by the converter, never hashed
    apart. Mutation control: taking the pins with ``pins_of`` before the pass (a second
    read of the weights) puts the shard in ``hashed`` and this test fails."""
    opened, hashed = counting
    result, pins = pin_and_prepare(tiny_dir, "bf16", expected=QWEN3, cache_root=tmp_path / "a")
    assert [s.name for s in opened] == [WEIGHTS]
    assert opened[0].requested == (tiny_dir / WEIGHTS).stat().st_size
    assert (opened[0].hash_only_bytes, opened[0].unhashed_bytes) == (0, 0)
    assert WEIGHTS not in hashed
    small = [p.name for p in tiny_dir.iterdir() if p.name not in (WEIGHTS, "config.json")]
    assert sorted(hashed) == sorted(2 * small)  # before planning, and again after the pass
    expected = pins_of(tiny_dir)
    assert list(pins) == sorted(expected, key=lambda pin: pin.name)
    assert result.key == cache_key(table_digest(expected), "bf16")
    assert result.provenance == "built_by_this_run" and result.times is not None
    separate = prepare_model(tiny_dir, expected, "bf16", cache_root=tmp_path / "b")
    assert (separate.key, separate.sha256, separate.size) == (
        result.key,
        result.sha256,
        result.size,
    )
    assert _leftovers(tmp_path / "a") == [result.key]


def test_a_small_file_changed_during_the_pass_is_refused(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan reads the tokenizer by path after its pin was taken: a tokenizer changed
    in between (same size) is ``digest_mismatch`` naming it, and nothing is cached.
    Mutation control: without the re-hash of the small files after the pass the
    changed file's old digest becomes the pin and this test fails."""
    root = copy_of(tiny_dir)
    target = root / "tokenizer_config.json"
    text = target.read_bytes()
    flipped = text.replace(b'"', b"'", 1) if b'"' in text else text

    _during_pass(monkeypatch, lambda: target.write_bytes(flipped))
    with pytest.raises(PinError) as info:
        pin_and_prepare(root, "bf16", expected=QWEN3, cache_root=tmp_path / "c")
    assert (info.value.category, info.value.subject) == ("digest_mismatch", target.name)
    assert _leftovers(tmp_path / "c") == []


def test_a_file_added_during_the_pass_is_refused(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that appears while the pass runs is in no pin: ``unlisted_file`` naming
    it, nothing cached. Mutation control: without the tree check after the pass the
    snapshot is pinned without it and this test fails."""
    root = copy_of(tiny_dir)
    _during_pass(monkeypatch, lambda: (root / "added.txt").write_text("late\n"))
    with pytest.raises(PinError) as info:
        pin_and_prepare(root, "bf16", expected=QWEN3, cache_root=tmp_path / "c")
    assert (info.value.category, info.value.subject) == ("unlisted_file", "added.txt")
    assert _leftovers(tmp_path / "c") == []


def test_a_shard_resized_during_the_pass_is_refused(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard that grows after it was read: its pin has the size the pass read, the
    tree check finds another (``size_mismatch``). Mutation control: without the tree
    check after the pass this test fails."""
    root = copy_of(tiny_dir)

    def grow() -> None:
        with (root / WEIGHTS).open("ab") as handle:
            handle.write(b"\0" * 8)

    _during_pass(monkeypatch, grow)
    with pytest.raises(PinError) as info:
        pin_and_prepare(root, "bf16", expected=QWEN3, cache_root=tmp_path / "c")
    assert (info.value.category, info.value.subject) == ("size_mismatch", WEIGHTS)


def test_an_importable_file_is_refused_before_anything_is_read(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, counting: tuple[list[Counting], list[str]]
) -> None:
    """No pin may vouch for code: a ``.py`` in the snapshot is refused by name before a
    byte of it or of the weights is read. Mutation control: without the suffix check
    the module is pinned like any file and this test fails."""
    opened, hashed = counting
    root = copy_of(tiny_dir)
    (root / "modeling_evil.py").write_text("import os\n")
    with pytest.raises(PinError) as info:
        pin_and_prepare(root, "bf16", expected=QWEN3, cache_root=tmp_path / "c")
    assert (info.value.category, info.value.subject) == (
        "unlisted_importable_file",
        "modeling_evil.py",
    )
    assert (opened, hashed) == ([], [])


def test_an_architecture_the_profile_does_not_expect_is_refused_before_the_weights(
    tmp_path: Path, tiny_dir: Path, counting: tuple[list[Counting], list[str]]
) -> None:
    """The architecture is checked on the hashed config before any shard is opened.
    Mutation control: dropping the check converts a Llama snapshot for a Qwen3 profile
    and this test fails."""
    from host.model.pins import ExpectedArchitecture

    opened, _ = counting
    llama = ExpectedArchitecture(("LlamaForCausalLM",), "llama")
    with pytest.raises(PinError) as info:
        pin_and_prepare(tiny_dir, "bf16", expected=llama, cache_root=tmp_path / "c")
    assert info.value.category == "config_architecture_mismatch"
    assert opened == []


def test_a_refused_conversion_leaves_nothing_behind(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy
) -> None:
    """A shard whose header does not parse: the conversion refusal (there is no pin to
    compare with), and no entry and no staging directory are left."""
    root = copy_of(tiny_dir)
    data = bytearray((root / WEIGHTS).read_bytes())
    data[8] ^= 0x01  # the header's opening brace
    (root / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(ConvertError):
        pin_and_prepare(root, "bf16", expected=QWEN3, cache_root=tmp_path / "c")
    assert _leftovers(tmp_path / "c") == []


def test_a_key_filled_meanwhile_is_adopted_and_ours_dropped(tmp_path: Path, tiny_dir: Path) -> None:
    """The key is known only after the pass; another process may have filled it by then
    (the same pins): its entry is adopted after a re-hash, ours is dropped, and no
    staging directory is left. Mutation control: moving ours in regardless raises
    ``TargetExists`` and this test fails."""
    root = tmp_path / "c"
    first = prepare_model(tiny_dir, pins_of(tiny_dir), "bf16", cache_root=root)
    again, _ = pin_and_prepare(tiny_dir, "bf16", expected=QWEN3, cache_root=root)
    assert (again.provenance, again.key, again.sha256) == (
        "adopted_from_cache",
        first.key,
        first.sha256,
    )
    assert _leftovers(root) == [first.key]


def test_a_mixed_dtype_shard_is_hashed_again_against_its_pass_digest(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, counting: tuple[list[Counting], list[str]]
) -> None:
    """Tensors out of file order: some converted bytes were not the hashed buffers, so
    the shard is hashed again whole and must equal the digest its pin records."""
    opened, hashed = counting
    root = copy_of(tiny_dir)
    mixed_dtypes(root)
    result, pins = pin_and_prepare(root, "bf16", cache_root=tmp_path / "c")
    assert not opened[0].converted_is_hashed
    assert hashed.count(WEIGHTS) == 1
    assert {p.name: p for p in pins}[WEIGHTS] == {p.name: p for p in pins_of(root)}[WEIGHTS]
    assert isinstance(opened[0], HashedSource) and result.provenance == "built_by_this_run"
