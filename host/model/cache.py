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

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host.model.categories import CacheError, OutType, Provenance
from host.model.convert import (
    CONVERTER_VERSION,
    GGUF_NAME,
    plan_conversion,
    planned_size,
    write_gguf,
)
from host.model.diskspace import require_free_space
from host.model.keys import content_key
from host.model.pins import ExpectedArchitecture, Pin, PinReport, sha256_file, verify_source
from host.model.verify_gguf import verify_gguf
from receipts.canonical import canonical
from receipts.staging import fill_lock, staged_directory
from receipts.strictjson import StrictJsonError, loads_strict

ENTRY_NAME = "entry.json"
ENTRY_SCHEMA = "harness.model-cache-entry/1"


@dataclass(frozen=True)
class CacheResult:
    """A ready GGUF: where it is, what it hashes to, and who built it."""

    key: str
    directory: Path
    gguf_path: Path
    sha256: str
    size: int
    provenance: Provenance


def default_cache_root() -> Path:
    """``~/.cache/harness/models``."""
    return Path.home() / ".cache" / "harness" / "models"


def cache_inputs(source_pins_sha256: str, outtype: OutType) -> dict[str, Any]:
    """The declared inputs that determine the GGUF's bytes."""
    return {
        "converter_version": CONVERTER_VERSION,
        "outtype": outtype,
        "source_pins_sha256": source_pins_sha256,
    }


def cache_key(source_pins_sha256: str, outtype: OutType) -> str:
    """SHA-256 of the canonical JSON of the declared inputs."""
    return content_key(cache_inputs(source_pins_sha256, outtype))


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


def prepare_model(
    source: Path,
    pins: Iterable[Pin],
    outtype: OutType,
    *,
    expected: ExpectedArchitecture | None = None,
    cache_root: Path | None = None,
    progress: Callable[[str], None] | None = None,
    verified: PinReport | None = None,
) -> CacheResult:
    """Verify the source pins, then adopt the cached GGUF or build, verify and cache it.

    The source is re-verified against its pins after conversion, so a file that
    changed while it was being read cannot end up in a cache entry. Free space for
    the planned GGUF is checked before staging (``insufficient_disk_space``); a write
    that fails for want of space leaves nothing behind and reaches the caller as
    ``OSError`` (the model stage names it ``disk_full``).

    *verified* is the report of a ``verify_source`` the caller ran on this source, these
    pins and this expectation just before (the model stage times it apart): the source is
    then not hashed a second time before conversion. It is still re-verified after.
    """
    pin_list = list(pins)
    if verified is not None and verified.pins == tuple(sorted(pin_list, key=lambda p: p.name)):
        report = verified
    else:
        report = verify_source(source, pin_list, expected)
    key = cache_key(report.table_digest, outtype)
    root = cache_root if cache_root is not None else default_cache_root()
    directory = root / key
    root.mkdir(parents=True, exist_ok=True)
    with fill_lock(directory, "a converted model"):
        if directory.is_dir() and any(directory.iterdir()):
            return adopt(directory, key)
        plan = plan_conversion(source, outtype)
        require_free_space(root, planned_size(plan))
        with staged_directory(directory) as stage:
            digest, size = write_gguf(plan, stage / GGUF_NAME, progress)
            verify_gguf(stage / GGUF_NAME, source, outtype, expected_sha256=digest)
            verify_source(source, pin_list, expected)
            record = {
                "schema": ENTRY_SCHEMA,
                "key": key,
                "inputs": cache_inputs(report.table_digest, outtype),
                "gguf": {"name": GGUF_NAME, "sha256": digest, "size": size},
            }
            (stage / ENTRY_NAME).write_bytes(canonical(record) + b"\n")
    return CacheResult(key, directory, directory / GGUF_NAME, digest, size, "built_by_this_run")
