"""Content-keyed model cache: build, adopt, and refuse corrupted entries."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

import host.model.cache as cache_module
from host.model.cache import (
    ENTRY_NAME,
    PrepareTimes,
    adopt,
    cache_inputs,
    cache_key,
    default_cache_root,
    pin_and_prepare,
    prepare_model,
    read_entry,
)
from host.model.categories import CacheError, PinError, VerifyError
from host.model.convert import CONVERTER_VERSION, GGUF_NAME
from host.model.pins import ExpectedArchitecture, pins_of, table_digest

QWEN3 = ExpectedArchitecture(("Qwen3ForCausalLM",), "qwen3")
Copy = Callable[[Path], Path]


def test_key_is_sha256_of_canonical_inputs() -> None:
    digest = "a" * 64
    inputs = cache_inputs(digest, "bf16")
    assert inputs == {
        "converter_version": CONVERTER_VERSION,
        "outtype": "bf16",
        "source_pins_sha256": digest,
    }
    text = json.dumps(inputs, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert cache_key(digest, "bf16") == hashlib.sha256(text.encode()).hexdigest()
    assert cache_key(digest, "f16") != cache_key(digest, "bf16")
    assert cache_key("b" * 64, "bf16") != cache_key(digest, "bf16")


def test_build_then_adopt(tmp_path: Path, tiny_dir: Path) -> None:
    pins = pins_of(tiny_dir)
    built = prepare_model(tiny_dir, pins, "q8_0", expected=QWEN3, cache_root=tmp_path)
    assert built.provenance == "built_by_this_run"
    assert built.key == cache_key(table_digest(pins), "q8_0")
    assert built.directory == tmp_path / built.key
    assert sorted(p.name for p in built.directory.iterdir()) == [ENTRY_NAME, GGUF_NAME]
    assert hashlib.sha256(built.gguf_path.read_bytes()).hexdigest() == built.sha256
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f".{built.key}.lock", built.key]  # the fill lock stays, no staging left
    record = json.loads((built.directory / ENTRY_NAME).read_text())
    assert record["gguf"] == {"name": GGUF_NAME, "sha256": built.sha256, "size": built.size}
    again = prepare_model(tiny_dir, pins, "q8_0", expected=QWEN3, cache_root=tmp_path)
    assert again.provenance == "adopted_from_cache"
    assert (again.key, again.sha256, again.size) == (built.key, built.sha256, built.size)


def test_other_outtype_other_entry(tmp_path: Path, tiny_dir: Path) -> None:
    pins = pins_of(tiny_dir)
    a = prepare_model(tiny_dir, pins, "f16", cache_root=tmp_path)
    b = prepare_model(tiny_dir, pins, "bf16", cache_root=tmp_path)
    assert a.key != b.key
    assert b.provenance == "built_by_this_run"


def _built(tmp_path: Path, tiny_dir: Path) -> tuple[Path, str]:
    result = prepare_model(tiny_dir, pins_of(tiny_dir), "f32", cache_root=tmp_path)
    return result.directory, result.key


def _refused(tmp_path: Path, tiny_dir: Path) -> str:
    with pytest.raises(CacheError) as info:
        prepare_model(tiny_dir, pins_of(tiny_dir), "f32", cache_root=tmp_path)
    return info.value.category


def test_corrupted_gguf_is_refused_never_used(tmp_path: Path, tiny_dir: Path) -> None:
    directory, _ = _built(tmp_path, tiny_dir)
    gguf_path = directory / GGUF_NAME
    data = bytearray(gguf_path.read_bytes())
    data[len(data) // 2] ^= 0x40
    gguf_path.write_bytes(bytes(data))
    assert _refused(tmp_path, tiny_dir) == "cache_entry_corrupt"
    assert gguf_path.read_bytes() == bytes(data)  # left for inspection, not rebuilt over


def test_truncated_gguf_is_refused(tmp_path: Path, tiny_dir: Path) -> None:
    directory, _ = _built(tmp_path, tiny_dir)
    gguf_path = directory / GGUF_NAME
    gguf_path.write_bytes(gguf_path.read_bytes()[:-32])
    assert _refused(tmp_path, tiny_dir) == "cache_entry_corrupt"


@pytest.mark.parametrize(
    "damage",
    ["not json", '{"schema": "harness.model-cache-entry/1"}', "wrong-key", "wrong-schema"],
)
def test_damaged_record_is_refused(tmp_path: Path, tiny_dir: Path, damage: str) -> None:
    directory, _ = _built(tmp_path, tiny_dir)
    entry = directory / ENTRY_NAME
    record = json.loads(entry.read_text())
    if damage == "wrong-key":
        record["key"] = "0" * 64
        entry.write_text(json.dumps(record))
    elif damage == "wrong-schema":
        record["schema"] = "harness.model-cache-entry/0"
        entry.write_text(json.dumps(record))
    else:
        entry.write_text(damage)
    assert _refused(tmp_path, tiny_dir) == "cache_entry_corrupt"


def test_incomplete_entry_is_refused(tmp_path: Path, tiny_dir: Path) -> None:
    directory, key = _built(tmp_path, tiny_dir)
    (directory / ENTRY_NAME).unlink()
    assert _refused(tmp_path, tiny_dir) == "cache_entry_incomplete"
    (directory / "extra").write_text("x")
    with pytest.raises(CacheError) as info:
        adopt(directory, key)
    assert info.value.category == "cache_entry_incomplete"


def test_symlinked_gguf_is_refused(tmp_path: Path, tiny_dir: Path) -> None:
    directory, _ = _built(tmp_path, tiny_dir)
    gguf_path = directory / GGUF_NAME
    moved = tmp_path / "elsewhere.gguf"
    gguf_path.rename(moved)
    gguf_path.symlink_to(moved)
    assert _refused(tmp_path, tiny_dir) == "cache_entry_corrupt"


def test_empty_entry_dir_is_built_into(tmp_path: Path, tiny_dir: Path) -> None:
    key = cache_key(table_digest(pins_of(tiny_dir)), "f32")
    (tmp_path / key).mkdir()
    result = prepare_model(tiny_dir, pins_of(tiny_dir), "f32", cache_root=tmp_path)
    assert result.provenance == "built_by_this_run"


def test_pin_refusal_comes_first(tmp_path: Path, tiny_dir: Path, copy_of: Copy) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    (root / "extra.py").write_text("")
    with pytest.raises(PinError):
        prepare_model(root, pins, "f32", cache_root=tmp_path)
    assert list(tmp_path.iterdir()) == [root]  # nothing cached, nothing locked


def test_failed_verification_leaves_no_entry(tmp_path: Path, tiny_dir: Path, copy_of: Copy) -> None:
    """A GGUF that fails verification never becomes a cache entry.

    The config changes after the converter read it (from the progress hook), so the
    verifier, which re-reads the source, refuses the staged GGUF.
    """
    root = copy_of(tiny_dir)
    config = root / "config.json"
    cache = tmp_path / "cache"

    def tamper(name: str) -> None:
        if name == "output_norm.weight":
            text = config.read_bytes()
            config.write_bytes(text.replace(b'"max_position_embeddings"', b'"max_pos"'))

    with pytest.raises(VerifyError) as info:
        prepare_model(root, pins_of(root), "f32", cache_root=cache, progress=tamper)
    assert info.value.category == "source_unreadable"
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def test_source_changed_during_conversion_is_caught_by_repinning(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy
) -> None:
    root = copy_of(tiny_dir)
    pins = pins_of(root)
    cache = tmp_path / "cache"

    def add_file(name: str) -> None:
        if name == "output_norm.weight":
            (root / "late.txt").write_text("arrived while converting")

    with pytest.raises(PinError) as info:
        prepare_model(root, pins, "f32", cache_root=cache, progress=add_file)
    assert info.value.category == "unlisted_file"
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


@pytest.mark.parametrize("damage", ["duplicate_gguf", "nan_size", "not_an_object", "sha_not_str"])
def test_record_that_is_not_strict_json_is_refused(
    tmp_path: Path, tiny_dir: Path, damage: str
) -> None:
    """The entry record decides which GGUF a trial adopts. `json.loads` would adopt the
    first two (the last duplicate `gguf` wins; NaN is a float) and crash on the third and
    fourth (`[].get`; comparing a digest with a list is just unequal). All four are
    `cache_entry_corrupt`. Mutation control: read the record with `json.loads` and the
    first two adopt the entry (this test fails)."""
    directory, _ = _built(tmp_path, tiny_dir)
    entry = directory / ENTRY_NAME
    text = entry.read_text().strip()
    assert text.startswith("{") and '"gguf":{' in text
    if damage == "duplicate_gguf":
        text = '{"gguf":{"sha256":"' + "0" * 64 + '"},' + text[1:]
    elif damage == "nan_size":
        text = text.replace('"size":', '"size":NaN,"was_size":', 1)
    elif damage == "not_an_object":
        text = "[" + text + "]"
    else:
        record = json.loads(text)
        record["gguf"]["sha256"] = [record["gguf"]["sha256"]]
        text = json.dumps(record)
    entry.write_text(text)
    assert _refused(tmp_path, tiny_dir) == "cache_entry_corrupt"


def test_prepare_times_are_the_clock_in_milliseconds(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model record's timing fields are milliseconds of the clock between the
    prepare's stages (built, adopted, pinned in the pass). The clock here moves exactly
    10 s per reading, so each field is 10,000 ms (0 where a stage does not run); a scale
    off by 0.1 % would show as 9,990 or 10,010."""
    readings = iter(range(1_000))
    # Not from 0: a start reading of 0 would hide `verified + started` for `- started`.
    clock = SimpleNamespace(perf_counter=lambda: 1_000.0 + next(readings) * 10.0)
    monkeypatch.setattr(cache_module, "time", clock)
    pins = pins_of(tiny_dir)
    built = prepare_model(tiny_dir, pins, "q8_0", expected=QWEN3, cache_root=tmp_path / "a")
    assert built.times == PrepareTimes(10_000, 10_000, 10_000)
    adopted = prepare_model(tiny_dir, pins, "q8_0", expected=QWEN3, cache_root=tmp_path / "a")
    assert adopted.provenance == "adopted_from_cache"
    assert adopted.times == PrepareTimes(10_000, 0, 10_000)
    pinned, _ = pin_and_prepare(tiny_dir, "q8_0", expected=QWEN3, cache_root=tmp_path / "b")
    assert pinned.times == PrepareTimes(10_000, 10_000, 10_000)


def test_without_a_cache_root_the_entry_goes_under_the_home_cache(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented default root, `~/.cache/harness/models` (what `harness gc` and a
    second trial look in)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_root() == tmp_path / ".cache" / "harness" / "models"
    built = prepare_model(tiny_dir, pins_of(tiny_dir), "q8_0", expected=QWEN3)
    assert built.directory == tmp_path / ".cache" / "harness" / "models" / built.key


@pytest.mark.parametrize(
    "record",
    [
        {"schema": "harness.model-cache-entry/1", "key": 7, "gguf": {"sha256": "ab"}},
        {"schema": "harness.model-cache-entry/1", "key": "k", "gguf": {"sha256": 7}},
        {"schema": "harness.model-cache-entry/1", "key": "k", "gguf": "ab"},
        {"schema": "harness.model-cache-entry/2", "key": "k", "gguf": {"sha256": "ab"}},
        ["harness.model-cache-entry/1"],
    ],
    ids=["key-not-str", "sha-not-str", "gguf-not-object", "other-schema", "not-object"],
)
def test_read_entry_answers_none_for_a_record_that_is_not_ours(record: object) -> None:
    """`read_entry` promises a (str, str) pair or None: a caller other than `adopt` must
    not get a digest that is a number."""
    assert read_entry(json.dumps(record).encode()) is None
    ours = {"schema": "harness.model-cache-entry/1", "key": "k", "gguf": {"sha256": "ab"}}
    assert read_entry(json.dumps(ours).encode()) == ("k", "ab")
