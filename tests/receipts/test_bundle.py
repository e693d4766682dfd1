"""The receipt ZIP is deterministic, staged, and refuses what it cannot hold whole."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import receipts.bundle as bundle_module
from receipts.bundle import (
    NotCurrentVersion,
    RecordTooLarge,
    SequenceOutOfOrder,
    TrialRecordMissing,
    bundle_bytes,
    bundle_entries,
    write_bundle,
    zip_bytes,
)
from receipts.records import MemoryRecord, MemorySample
from receipts.records.base import Record
from receipts.records.legacy import HostStateRecordV1, HostStateRecordV2
from receipts.recordset import MANIFEST_NAME
from receipts.staging import TargetExists, staged_file, staging_prefix
from tests.receipts.builders import accepted_model_trial, replace

# The SHA-256 of the receipt ZIP of `accepted_model_trial()`. Any machine, any run, any
# process must produce exactly these bytes; if a deliberate format change moves it,
# update it in the same commit and say why (last: the builders claim the harness version
# itself, 0.3.0: worker_request/3, worker/2, model/2, vm/3, verifier_vm/4).
GOLDEN_ZIP_SHA256 = "eab4bb5803354d118ae3507a794c8a41ce689323aabfd332fa8c3231d4859432"


def test_same_records_give_the_same_zip_bytes(tmp_path: Path) -> None:
    first = write_bundle(accepted_model_trial(), tmp_path / "a.zip")
    second = write_bundle(accepted_model_trial(), tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert first == second


def test_zip_bytes_match_the_golden_digest() -> None:
    assert hashlib.sha256(bundle_bytes(accepted_model_trial())).hexdigest() == GOLDEN_ZIP_SHA256


def test_zip_bytes_do_not_depend_on_the_process() -> None:
    """A fresh interpreter with another hash seed writes the same bytes."""
    code = (
        "import hashlib; from receipts.bundle import bundle_bytes;"
        "from tests.receipts.builders import accepted_model_trial;"
        "print(hashlib.sha256(bundle_bytes(accepted_model_trial())).hexdigest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        cwd=Path(__file__).parents[2],
    )
    assert out.stdout.strip() == GOLDEN_ZIP_SHA256


def test_container_layout() -> None:
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(accepted_model_trial()))) as zf:
        infos = zf.infolist()
    names = [info.filename for info in infos]
    assert names == sorted(names)
    assert "manifest.json" in names
    for info in infos:
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.compress_type == zipfile.ZIP_STORED
        assert info.external_attr >> 16 == 0o100644
        assert not info.is_dir()
        assert info.extra == b""


def test_manifest_lists_every_entry_with_digest() -> None:
    import json

    with zipfile.ZipFile(io.BytesIO(bundle_bytes(accepted_model_trial()))) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        listed = {e["name"]: e for e in manifest["entries"]}
        assert set(listed) == set(zf.namelist()) - {"manifest.json"}
        for name, entry in listed.items():
            data = zf.read(name)
            assert entry["size"] == len(data)
            assert entry["sha256"] == hashlib.sha256(data).hexdigest()


def test_oversize_record_is_refused_not_cut() -> None:
    big = 1 << 49
    sample = MemorySample(
        at_ms=1,
        host_available_bytes=big,
        host_page_cache_bytes=big,
        qemu_usage_bytes=big,
        qemu_working_set_bytes=big,
        worker_usage_bytes=big,
        worker_working_set_bytes=big,
    )
    # past the model's own sample cap (model_construct skips it): the writer's ceiling
    # must still refuse it, not cut it
    oversize = MemoryRecord.model_construct(interval_ms=50, samples=(sample,) * 1000)
    records = dataclasses.replace(accepted_model_trial(), memory=oversize)
    with pytest.raises(RecordTooLarge):
        bundle_bytes(records)


def test_sequence_index_must_match_position() -> None:
    records = accepted_model_trial()
    shifted = tuple(replace(c, index=c.index + 1) for c in records.cleanup)
    with pytest.raises(SequenceOutOfOrder):
        bundle_bytes(dataclasses.replace(records, cleanup=shifted))


def test_an_older_record_version_is_never_written() -> None:
    """The audit reads hoststate/1 and /2 from older receipts; a new receipt never carries
    them."""
    records = accepted_model_trial()
    assert records.hoststate is not None
    names = ("routes", "resolver", "listening_sockets", "cgroups", "firewall")
    current = records.hoststate.routes.model_dump()
    v1_facet = {k: v for k, v in current.items() if "excluded" not in k and "unrelated" not in k}
    v2_facet = {k: v for k, v in current.items() if "unrelated" not in k}
    v1 = HostStateRecordV1.model_validate(dict.fromkeys(names, v1_facet))
    v2 = HostStateRecordV2.model_validate({**dict.fromkeys(names, v2_facet), "excluded_trials": ()})
    for old in (v1, v2):
        with pytest.raises(NotCurrentVersion, match=r"hoststate\.json"):
            bundle_bytes(dataclasses.replace(records, hoststate=old))


def test_trial_record_is_required() -> None:
    with pytest.raises(TrialRecordMissing):
        bundle_bytes(dataclasses.replace(accepted_model_trial(), trial=None))


def test_existing_target_is_never_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "r.zip"
    target.write_bytes(b"someone else's receipt")
    with pytest.raises(TargetExists):
        write_bundle(accepted_model_trial(), target)
    assert target.read_bytes() == b"someone else's receipt"


def test_target_appearing_during_the_write_is_not_overwritten(tmp_path: Path) -> None:
    """The existence check happens before writing; the final link must re-check atomically."""
    target = tmp_path / "r.zip"
    with pytest.raises(TargetExists), staged_file(target) as staged:
        staged.write_bytes(b"ours")
        target.write_bytes(b"theirs, created meanwhile")
    assert target.read_bytes() == b"theirs, created meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zip"]


def test_stale_staging_is_removed_and_failure_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "r.zip"
    stale = tmp_path / f"{staging_prefix(target)}killed"  # no live filler holds its lock
    stale.mkdir()
    (stale / "r.zip").write_bytes(b"partial from a killed run")
    records = dataclasses.replace(accepted_model_trial(), trial=None)
    with pytest.raises(TrialRecordMissing):
        write_bundle(records, target)
    write_bundle(accepted_model_trial(), target)
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zip"]


def test_interrupt_during_write_removes_the_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(_self: Path, _data: bytes) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_bundle(accepted_model_trial(), tmp_path / "r.zip")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_the_container_is_never_zip64() -> None:
    """The audit reads ZIP32 only; a receipt that would need ZIP64 (here 65,536 entries,
    one past ZIP32's count) is refused at writing, not written in a shape the audit
    refuses."""
    assert zip_bytes({"a": b""})[-22:-18] == b"PK\x05\x06"  # a plain end record
    with pytest.raises(zipfile.LargeZipFile):
        zip_bytes({f"e{i:05d}": b"" for i in range(65_536)})


def test_a_record_and_a_manifest_of_exactly_their_ceiling_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ceilings are inclusive: at exactly the ceiling an entry is written, one byte
    over it is refused. The ceilings are lowered to this receipt's own largest record
    and its manifest (a 64 KiB record cannot be built from bounded fields here)."""
    records = accepted_model_trial()
    entries = bundle_entries(records)
    largest = max(len(data) for name, data in entries.items() if name != MANIFEST_NAME)
    manifest = len(entries[MANIFEST_NAME])
    monkeypatch.setattr(Record, "CEILING_BYTES", largest)
    monkeypatch.setattr(bundle_module, "MANIFEST_CEILING_BYTES", manifest)
    assert bundle_entries(records) == entries
    monkeypatch.setattr(Record, "CEILING_BYTES", largest - 1)
    with pytest.raises(RecordTooLarge):
        bundle_entries(records)
    monkeypatch.setattr(Record, "CEILING_BYTES", largest)
    monkeypatch.setattr(bundle_module, "MANIFEST_CEILING_BYTES", manifest - 1)
    with pytest.raises(RecordTooLarge) as info:
        bundle_entries(records)
    assert str(info.value) == MANIFEST_NAME
