"""A cache entry is adopted only if every byte still matches its build-time manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from host.image.build import ensure_image
from host.image.errors import ImageError
from host.image.manifest import IMAGE_FILES, MANIFEST_NAME, Manifest, digest_files, verify_entry
from host.image.recipe import Recipe
from host.image.show import list_entries
from receipts.canonical import canonical
from tests.host.image.test_recipe import make_recipe


def fake_entry(root: Path, recipe: Recipe | None = None) -> Path:
    recipe = recipe or make_recipe()
    entry = root / recipe.key()
    entry.mkdir(parents=True)
    for index, name in enumerate(IMAGE_FILES):
        (entry / name).write_bytes(bytes([index]) * (1000 + index))
    manifest = Manifest.model_validate(
        {
            "schema": "harness.image-manifest/1",
            "key": recipe.key(),
            "recipe": recipe.as_json(),
            "kernel_release": "6.1.0-57-amd64",
            "modules": ["virtio.ko"],
            "files": digest_files(entry),
            "installed_packages": {"count": 100, "sha256": "a" * 64},
        },
        by_alias=True,
    )
    (entry / MANIFEST_NAME).write_bytes(canonical(manifest.as_json()))
    return entry


def test_intact_entry_is_adopted_with_provenance(tmp_path: Path) -> None:
    entry = fake_entry(tmp_path)
    image = ensure_image(tmp_path, make_recipe())
    assert image.provenance == "adopted_from_cache"
    assert image.directory == entry
    record = image.to_record()
    assert record.provenance == "adopted_from_cache"
    assert record.image_key == entry.name


@pytest.mark.parametrize("name", IMAGE_FILES)
def test_one_flipped_byte_is_refused(name: str, tmp_path: Path) -> None:
    entry = fake_entry(tmp_path)
    data = bytearray((entry / name).read_bytes())
    data[500] ^= 1
    (entry / name).write_bytes(bytes(data))
    with pytest.raises(ImageError) as err:
        ensure_image(tmp_path, make_recipe())
    assert err.value.category == "cache_corrupt"


def test_missing_extra_or_replaced_files_are_refused(tmp_path: Path) -> None:
    entry = fake_entry(tmp_path)
    (entry / "stray").write_bytes(b"x")
    with pytest.raises(ImageError):
        verify_entry(entry, entry.name)
    (entry / "stray").unlink()
    (entry / IMAGE_FILES[0]).unlink()
    with pytest.raises(ImageError):
        verify_entry(entry, entry.name)


def test_manifest_must_be_canonical_and_match_the_key(tmp_path: Path) -> None:
    entry = fake_entry(tmp_path)
    verify_entry(entry, entry.name)
    manifest_path = entry / MANIFEST_NAME
    original = manifest_path.read_bytes()
    manifest_path.write_text(json.dumps(json.loads(original), indent=1))
    with pytest.raises(ImageError):
        verify_entry(entry, entry.name)
    doc = json.loads(original)
    doc["recipe"]["suite"] = "trixie"  # recipe no longer hashes to the key
    manifest_path.write_bytes(canonical(doc))
    with pytest.raises(ImageError):
        verify_entry(entry, entry.name)
    doc = json.loads(original)
    doc["files"][IMAGE_FILES[0]]["size"] += 1
    manifest_path.write_bytes(canonical(doc))
    with pytest.raises(ImageError):
        verify_entry(entry, entry.name)


def test_entry_under_another_key_is_refused(tmp_path: Path) -> None:
    entry = fake_entry(tmp_path)
    moved = entry.with_name("f" * 64)
    entry.rename(moved)
    with pytest.raises(ImageError):
        verify_entry(moved, moved.name)


def test_show_verifies_every_entry(tmp_path: Path) -> None:
    entry = fake_entry(tmp_path)
    (tmp_path / "not-a-key").mkdir()
    (tmp_path / ".work-x").mkdir()
    listing = list_entries(tmp_path)
    assert [(e.key, e.state) for e in listing] == [(entry.name, "ok"), ("not-a-key", "corrupt")]
    (entry / IMAGE_FILES[1]).write_bytes(b"changed")
    assert list_entries(tmp_path)[0].state == "corrupt"


def test_stale_work_and_staging_dirs_are_swept_under_the_lock(tmp_path: Path) -> None:
    fake_entry(tmp_path)
    (tmp_path / ".work-deadbeef").mkdir()
    (tmp_path / f".{'e' * 64}.staging").mkdir()  # the name used before per-filler names
    (tmp_path / f".{'e' * 64}.staging-dead").mkdir()  # no live filler holds its lock
    (tmp_path / ".resolved").mkdir()  # the recorded resolutions are no leftover
    ensure_image(tmp_path, make_recipe())
    # adopting needs no apt state (.apt is made only to resolve or build)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [
        ".lock",
        ".resolved",
    ]
