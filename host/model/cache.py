"""Content-keyed cache of converted models (docs/engineering.md §5, §6).

Why: conversion of a real model takes minutes and its result must be the same bytes
for the same inputs, so we key the result by what determines it: the source pin
table's digest, the converter version and the output type (canonical JSON, SHA-256).
An entry is built in a staging directory, verified against its source, and renamed
into place with a record of its digest. Adopting an entry re-hashes the GGUF and
refuses it on any mismatch: a corrupted entry is never used. The check and the build
run under the entry's fill lock, so two processes preparing one model convert it once.
Whether this run built the entry or adopted it is returned as a separate field, never
folded into the key.

Layout: ``<root>/<key>/model.gguf`` and ``<root>/<key>/entry.json``; the default
root is ``~/.cache/harness/models``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host.model.categories import (
    CacheError,
    ConvertError,
    HeaderError,
    OutType,
    PinError,
    Provenance,
    VerifyError,
)
from host.model.convert import (
    CONVERTER_VERSION,
    GGUF_NAME,
    plan_conversion,
    planned_size,
    write_gguf,
)
from host.model.diskspace import require_free_space
from host.model.pins import (
    IMPORTABLE_SUFFIXES,
    ExpectedArchitecture,
    Pin,
    check_architecture,
    check_tree,
    sha256_file,
    snapshot_files,
    table_digest,
    verify_files,
)
from host.model.sourcehash import HashedSource
from host.model.verify_gguf import InWriteCheck, verify_written
from host.model.vocab import load_json_object
from receipts.canonical import canonical
from receipts.modelkey import converted_inputs, converted_key
from receipts.staging import fill_lock, staged_directory, staged_unnamed
from receipts.strictjson import StrictJsonError, loads_strict

ENTRY_NAME = "entry.json"
ENTRY_SCHEMA = "harness.model-cache-entry/1"


@dataclass(frozen=True)
class PrepareTimes:
    """Where a prepare's time went, in milliseconds (the model record's fields).

    ``verify_source_ms``: the tree and every pinned file that is not a shard, and on
    adoption the whole source; ``convert_ms``: the one pass (shards read, hashed,
    converted, checked and written, the GGUF hashed and made durable); ``verify_gguf_ms``:
    the written header read back and checked, any re-verification after the pass, and
    on adoption the GGUF's re-hash.
    """

    verify_source_ms: int
    convert_ms: int
    verify_gguf_ms: int


@dataclass(frozen=True)
class CacheResult:
    """A ready GGUF: where it is, what it hashes to, and who built it."""

    key: str
    directory: Path
    gguf_path: Path
    sha256: str
    size: int
    provenance: Provenance
    times: PrepareTimes | None = None


def default_cache_root() -> Path:
    """``~/.cache/harness/models``."""
    return Path.home() / ".cache" / "harness" / "models"


def cache_inputs(source_pins_sha256: str, outtype: OutType) -> dict[str, Any]:
    """The declared inputs that determine the GGUF's bytes."""
    return converted_inputs(source_pins_sha256, CONVERTER_VERSION, outtype)


def cache_key(source_pins_sha256: str, outtype: OutType) -> str:
    """SHA-256 of the canonical JSON of the declared inputs (receipts/modelkey.py: the
    audit recomputes it from the model record)."""
    return converted_key(source_pins_sha256, CONVERTER_VERSION, outtype)


def read_entry(data: bytes) -> tuple[str, str] | None:
    """The (key, GGUF sha256) an entry record states, or None if it is not our record.

    Strict JSON (`receipts.strictjson`, which raises `StrictJsonError`): the record decides
    which bytes a trial adopts as its model, so `{"key": A, "key": B}` must not mean
    whichever came last, and a record whose digest is not a string is no record at all.
    """
    record = loads_strict(data)
    if not isinstance(record, dict) or record.get("schema") != ENTRY_SCHEMA:
        return None
    gguf, key = record.get("gguf"), record.get("key")
    sha256 = gguf.get("sha256") if isinstance(gguf, dict) else None
    if not isinstance(key, str) or not isinstance(sha256, str):
        return None
    return key, sha256


def adopt(directory: Path, key: str) -> CacheResult:
    """Use an existing entry only if its record is intact and the GGUF re-hashes to it."""
    names = sorted(p.name for p in directory.iterdir())
    if names != sorted([ENTRY_NAME, GGUF_NAME]):
        raise CacheError("cache_entry_incomplete")
    gguf_path = directory / GGUF_NAME
    if gguf_path.is_symlink() or (directory / ENTRY_NAME).is_symlink():
        raise CacheError("cache_entry_corrupt")
    try:
        record = read_entry((directory / ENTRY_NAME).read_bytes())
    except (OSError, StrictJsonError) as exc:
        raise CacheError("cache_entry_corrupt") from exc
    if record is None:
        raise CacheError("cache_entry_corrupt")
    recorded_key, recorded_sha = record
    if recorded_key != key:
        raise CacheError("cache_entry_corrupt")
    digest, size = sha256_file(gguf_path)
    if digest != recorded_sha:
        raise CacheError("cache_entry_corrupt")
    return CacheResult(key, directory, gguf_path, digest, size, "adopted_from_cache")


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def prepare_model(
    source: Path,
    pins: Iterable[Pin],
    outtype: OutType,
    *,
    expected: ExpectedArchitecture | None = None,
    cache_root: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> CacheResult:
    """Adopt the cached GGUF of these pins, or build it in one pass over the source.

    Adopting: the source is verified against its pins (every file hashed), then the
    entry's GGUF re-hashed against its record. Building (:func:`_build`): each shard is
    hashed while it is read for conversion, and the GGUF hashed and checked while it is
    written. Free space for the planned GGUF is checked before staging
    (``insufficient_disk_space``); a write that fails for want of space leaves nothing
    behind and reaches the caller as ``OSError`` (the model stage names it ``disk_full``).
    """
    started = time.perf_counter()
    pin_list = list(pins)
    by_name, files = check_tree(source, pin_list)
    pin_digest = table_digest(pin_list)
    key = cache_key(pin_digest, outtype)
    root = cache_root if cache_root is not None else default_cache_root()
    directory = root / key
    root.mkdir(parents=True, exist_ok=True)
    with fill_lock(directory, "a converted model"):
        if directory.is_dir() and any(directory.iterdir()):
            verify_files(by_name, files, by_name, expected)
            verified = time.perf_counter()
            result = adopt(directory, key)
            times = PrepareTimes(_ms(verified - started), 0, _ms(time.perf_counter() - verified))
            return dataclasses.replace(result, times=times)
        return _build(
            source,
            by_name,
            files,
            outtype=outtype,
            expected=expected,
            directory=directory,
            progress=progress,
            started=started,
        )


SHARD_SUFFIX = ".safetensors"


def _build(
    source: Path,
    by_name: dict[str, Pin],
    files: dict[str, Path],
    *,
    outtype: OutType,
    expected: ExpectedArchitecture | None,
    directory: Path,
    progress: Callable[[str], None] | None,
    started: float,
) -> CacheResult:
    """Convert with every shard hashed as it is read, the GGUF checked as it is written.

    Order of the evidence: the small files (config, tokenizer, index, card) are hashed
    and the architecture checked before planning; each shard is opened once and its
    header, tensors and any remainder hashed through that file descriptor during the
    pass; after the pass each shard's digest is compared with its pin, the written
    header is read back and checked (:func:`verify_written`), and the small files are
    hashed again (the plan read them by path, so a change in between is caught). A
    shard whose converted bytes were not all the hashed buffers (tensors out of file
    order) is hashed again whole. A refusal of the pass (a header, a tensor) on a
    shard that does not match its pin is reported as the pin refusal.
    """
    small = [name for name in by_name if not name.endswith(SHARD_SUFFIX)]
    verify_files(by_name, files, small, expected)
    with ExitStack() as stack:
        sources: dict[Path, HashedSource] = {}
        for name in sorted(set(by_name) - set(small)):
            hashed = HashedSource(name, files[name])
            stack.callback(hashed.close)
            sources[source / name] = hashed
        verified = time.perf_counter()
        try:
            plan = plan_conversion(source, outtype, sources)
            require_free_space(directory.parent, planned_size(plan))
            with staged_directory(directory) as stage:
                check = InWriteCheck(plan)
                digest, size = write_gguf(
                    plan, stage / GGUF_NAME, progress, sources=sources, check=check
                )
                _compare_shards(by_name, sources)
                converted = time.perf_counter()
                config = load_json_object(source / "config.json")
                verify_written(stage / GGUF_NAME, config, plan, check)
                check_tree(source, by_name.values())  # nothing added, nothing resized
                again = small + [h.name for h in sources.values() if not h.converted_is_hashed]
                verify_files(by_name, files, again)
                record = _entry_record(directory.name, by_name.values(), outtype, digest, size)
                (stage / ENTRY_NAME).write_bytes(record)
        except (ConvertError, HeaderError, VerifyError):
            _compare_shards(by_name, sources)  # a shard that is not the pinned one
            raise
    done = time.perf_counter()
    times = PrepareTimes(_ms(verified - started), _ms(converted - verified), _ms(done - converted))
    return CacheResult(
        directory.name, directory, directory / GGUF_NAME, digest, size, "built_by_this_run", times
    )


def _compare_shards(by_name: dict[str, Pin], sources: dict[Path, HashedSource]) -> None:
    """Finish each shard's hash (whatever the pass did not read) and compare it."""
    for hashed in sources.values():
        digest, size = hashed.finish()
        pin = by_name[hashed.name]
        if digest != pin.sha256 or size != pin.size:
            raise PinError("digest_mismatch", hashed.name)


def _entry_record(key: str, pins: Iterable[Pin], outtype: OutType, digest: str, size: int) -> bytes:
    """The entry's record: its key, the inputs that determine it, the GGUF's digest."""
    record = {
        "schema": ENTRY_SCHEMA,
        "key": key,
        "inputs": cache_inputs(table_digest(pins), outtype),
        "gguf": {"name": GGUF_NAME, "sha256": digest, "size": size},
    }
    return canonical(record) + b"\n"


def _hash_small(
    files: dict[str, Path], names: Iterable[str], expected: ExpectedArchitecture | None
) -> list[Pin]:
    """Pin the small files (everything but the shards); with *expected*, check the
    architecture from the very ``config.json`` bytes that were hashed."""
    pins: list[Pin] = []
    config_bytes: bytes | None = None
    for name in sorted(names):
        if name == "config.json":
            config_bytes = files[name].read_bytes()
            pins.append(Pin(name, len(config_bytes), hashlib.sha256(config_bytes).hexdigest()))
        else:
            digest, size = sha256_file(files[name])
            pins.append(Pin(name, size, digest))
    if expected is not None:
        if config_bytes is None:
            raise PinError("config_unreadable")
        check_architecture(config_bytes, expected)
    return pins


def _pin_of(hashed: HashedSource) -> Pin:
    """A shard's pin, from the pass that read it (its remainder hashed now)."""
    digest, size = hashed.finish()
    return Pin(hashed.name, size, digest)


def pin_and_prepare(
    source: Path,
    outtype: OutType,
    *,
    expected: ExpectedArchitecture | None = None,
    cache_root: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[CacheResult, tuple[Pin, ...]]:
    """Pin a snapshot and build its GGUF in the same pass: each byte read once.

    Why: ``pin`` then ``prepare`` reads and hashes the 8 GB source twice (the pin, then
    the pass that converts it). Here the pins are what this pass hashed: the small
    files before planning (the architecture checked on the hashed ``config.json``), each
    shard from the very buffers converted. The evidence is the same as a prepare
    against pins taken a moment earlier: after the pass the small files are hashed
    again and must match, the tree must be unchanged (nothing added, nothing resized),
    and a shard whose converted bytes were not all the hashed buffers is hashed again
    whole. The entry's key depends on the pins, so it is staged unnamed and renamed to
    its key under the key's fill lock; if another process filled that key meanwhile,
    its entry is adopted (re-hashed) and ours dropped. Importable files are refused
    before anything is read (no pin may vouch for code).

    Returns the cache result and the pins (sorted by name) for the caller's lock.
    """
    started = time.perf_counter()
    files = snapshot_files(source)
    for name in files:
        if name.endswith(IMPORTABLE_SUFFIXES):
            raise PinError("unlisted_importable_file", name)
    small = [name for name in files if not name.endswith(SHARD_SUFFIX)]
    small_pins = _hash_small(files, small, expected)
    root = cache_root if cache_root is not None else default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        sources: dict[Path, HashedSource] = {}
        for name in sorted(set(files) - set(small)):
            hashed = HashedSource(name, files[name])
            stack.callback(hashed.close)
            sources[source / name] = hashed
        verified = time.perf_counter()
        plan = plan_conversion(source, outtype, sources)
        require_free_space(root, planned_size(plan))
        with staged_unnamed(root) as stage:
            gguf_path = stage.content / GGUF_NAME
            check = InWriteCheck(plan)
            digest, size = write_gguf(plan, gguf_path, progress, sources=sources, check=check)
            shard_pins = [_pin_of(hashed) for hashed in sources.values()]
            converted = time.perf_counter()
            pins = tuple(sorted(small_pins + shard_pins, key=lambda pin: pin.name))
            verify_written(gguf_path, load_json_object(source / "config.json"), plan, check)
            by_name, now = check_tree(source, pins)  # nothing added, nothing resized
            again = small + [h.name for h in sources.values() if not h.converted_is_hashed]
            verify_files(by_name, now, again)
            key = cache_key(table_digest(pins), outtype)
            (stage.content / ENTRY_NAME).write_bytes(
                _entry_record(key, pins, outtype, digest, size)
            )
            with fill_lock(root / key, "a converted model"):
                directory = root / key
                if directory.is_dir() and any(directory.iterdir()):
                    result = adopt(directory, key)  # another process built it meanwhile
                else:
                    stage.move_into(key)
                    result = CacheResult(
                        key, directory, directory / GGUF_NAME, digest, size, "built_by_this_run"
                    )
    done = time.perf_counter()
    times = PrepareTimes(_ms(verified - started), _ms(converted - verified), _ms(done - converted))
    return dataclasses.replace(result, times=times), pins
