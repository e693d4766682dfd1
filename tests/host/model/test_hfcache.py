"""The HF cache layout (``hf download`` default): snapshot symlinks into ``blobs/``.

Snapshots are built here with real relative symlinks, as huggingface_hub writes them.
A link that resolves to a regular file directly in the same repository's ``blobs/`` is
accepted and pinned under its snapshot name; every other link is refused and named.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from host.model.cache import prepare_model
from host.model.categories import PinError
from host.model.pins import pins_of, verify_source
from tests.host.model.helpers import hf_cache_of


def _refused(snapshot: Path) -> tuple[str, str | None]:
    with pytest.raises(PinError) as info:
        pins_of(snapshot)
    return info.value.category, info.value.subject


def test_hf_cache_snapshot_pins_like_plain_files(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    assert (snapshot / "config.json").is_symlink()
    assert os.readlink(snapshot / "config.json").startswith("../../blobs/")
    # same names, sizes and digests as the plain folder: the pins are the content's
    assert pins_of(snapshot) == pins_of(tiny_dir)
    report = verify_source(snapshot, pins_of(tiny_dir))
    assert [p.name for p in report.pins] == sorted(p.name for p in pins_of(tiny_dir))


def test_hf_cache_snapshot_converts_to_the_same_gguf(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path / "hf")
    pins = pins_of(tiny_dir)
    from_cache = prepare_model(snapshot, pins, "bf16", cache_root=tmp_path / "c1")
    from_plain = prepare_model(tiny_dir, pins, "bf16", cache_root=tmp_path / "c2")
    assert from_cache.key == from_plain.key
    assert from_cache.sha256 == from_plain.sha256


def test_hf_cache_subdirectory_link(tiny_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(tiny_dir, plain)
    (plain / "extra").mkdir()
    (plain / "extra" / "notes.txt").write_text("pinned too")
    snapshot = hf_cache_of(plain, tmp_path / "hf")
    assert os.readlink(snapshot / "extra" / "notes.txt").startswith("../../../blobs/")
    assert pins_of(snapshot) == pins_of(plain)


def test_a_changed_blob_is_a_digest_mismatch(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    pins = pins_of(snapshot)
    blob = Path(os.path.realpath(snapshot / "tokenizer_config.json"))
    data = bytearray(blob.read_bytes())
    data[10] ^= 1
    blob.write_bytes(bytes(data))
    with pytest.raises(PinError) as info:
        verify_source(snapshot, pins)
    assert (info.value.category, info.value.subject) == ("digest_mismatch", "tokenizer_config.json")


def _relink(link: Path, target: str) -> None:
    link.unlink()
    link.symlink_to(target)


def test_absolute_link_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    blob = os.path.realpath(snapshot / "config.json")
    _relink(snapshot / "config.json", blob)  # the right blob, named absolutely
    assert _refused(snapshot) == ("symlink_absolute", "config.json")


def test_escaping_link_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_bytes((tiny_dir / "config.json").read_bytes())
    _relink(snapshot / "config.json", "../../../outside.json")
    assert _refused(snapshot) == ("symlink_outside_blobs", "config.json")


def test_link_to_another_snapshot_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    other = hf_cache_of(tiny_dir, tmp_path, revision="1" * 40)
    assert other.parent == snapshot.parent
    # the other snapshot's file is itself a valid link to the very same blob
    _relink(snapshot / "config.json", f"../{other.name}/config.json")
    assert _refused(snapshot) == ("symlink_outside_blobs", "config.json")


def test_dangling_link_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    Path(os.path.realpath(snapshot / "config.json")).unlink()
    assert _refused(snapshot) == ("symlink_dangling", "config.json")


def test_link_loop_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    blobs = snapshot.parent.parent / "blobs"
    (blobs / "loop").symlink_to("loop")  # a "blob" that is a link to itself
    _relink(snapshot / "config.json", "../../blobs/loop")
    assert _refused(snapshot) == ("symlink_not_file", "config.json")


def test_blob_linking_outside_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    blobs = snapshot.parent.parent / "blobs"
    outside = tmp_path / "outside.json"
    outside.write_bytes((tiny_dir / "config.json").read_bytes())
    (blobs / "relay").symlink_to(outside)
    _relink(snapshot / "config.json", "../../blobs/relay")
    assert _refused(snapshot) == ("symlink_not_file", "config.json")


def test_symlinked_blobs_directory_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path / "hf")
    blobs = snapshot.parent.parent / "blobs"
    moved = tmp_path / "elsewhere"
    blobs.rename(moved)
    blobs.symlink_to(moved)
    assert _refused(snapshot)[0] == "symlink_outside_blobs"


def test_symlinked_directory_refused(tiny_dir: Path, tmp_path: Path) -> None:
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    blobs = snapshot.parent.parent / "blobs"
    (blobs / "adir").mkdir()
    (snapshot / "sub").symlink_to("../../blobs/adir")
    assert _refused(snapshot) == ("symlink_not_file", "sub")


def test_links_outside_the_cache_layout_refused(tiny_dir: Path, tmp_path: Path) -> None:
    """A plain folder (not ``snapshots/<rev>``) with a link into a ``blobs`` beside it."""
    plain = tmp_path / "repo" / "plain"
    shutil.copytree(tiny_dir, plain)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "c").write_bytes((plain / "config.json").read_bytes())
    (plain / "config.json").unlink()
    (plain / "config.json").symlink_to("../../blobs/c")
    assert _refused(plain) == ("symlink_outside_blobs", "config.json")


def test_cache_reached_through_a_symlinked_ancestor_is_accepted(
    tiny_dir: Path, tmp_path: Path
) -> None:
    """~/.cache/huggingface is often a symlink to a larger disk: the snapshot's links
    still resolve into the same repository's blobs/, so it pins like the real path."""
    real = tmp_path / "bigdisk"
    snapshot = hf_cache_of(tiny_dir, real)
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    via_alias = alias / snapshot.relative_to(real)
    assert pins_of(via_alias) == pins_of(tiny_dir)


def test_a_blobs_that_is_a_file_is_a_refusal_not_a_crash(tiny_dir: Path, tmp_path: Path) -> None:
    """Looking a blob up under a `blobs` that is not a directory fails with ENOTDIR (not
    ENOENT): still a link that leads to no regular file, named, never an OSError out of
    the pin."""
    snapshot = hf_cache_of(tiny_dir, tmp_path)
    blobs = snapshot.parent.parent / "blobs"
    shutil.rmtree(blobs)
    blobs.write_bytes(b"not a directory")
    names = {path.name for path in snapshot.iterdir()}
    category, subject = _refused(snapshot)
    assert category == "symlink_not_file"
    assert subject in names
