"""The image manifest: what was built, with the digest of every file, written at build.

Why: an image directory in the cache is trusted by later runs only if its bytes are
still the bytes that were built. The manifest (canonical JSON) records the key, the
full recipe, and SHA-256 and size of the kernel, the initramfs and the qcow2 base,
hashed from the staged files before the rename. Adoption re-hashes every file and
refuses the entry (`cache_corrupt`) on any difference, on an unknown or missing
file, on a manifest that is not canonical, or on a recipe that does not hash to the
directory's name.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from host.image.digest import sha256_file
from host.image.errors import ImageError
from receipts.canonical import CanonicalError, canonical, parse_canonical
from receipts.types import Sha256Hex

MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA = "harness.image-manifest/1"
VMLINUX_NAME = "vmlinux"
INITRAMFS_NAME = "initramfs.cpio"
BASE_NAME = "base.qcow2"
IMAGE_FILES: tuple[str, ...] = (VMLINUX_NAME, INITRAMFS_NAME, BASE_NAME)


_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


class FileDigest(BaseModel):
    """SHA-256 and size of one image file."""

    model_config = _STRICT
    sha256: Sha256Hex
    size: int = Field(ge=0)


class InstalledPackagesDigest(BaseModel):
    """How many packages the rootfs's dpkg lists, and the digest of that sorted list."""

    model_config = _STRICT
    count: int = Field(ge=1)
    sha256: Sha256Hex


class Manifest(BaseModel):
    """The manifest of one image directory (closed: unknown fields are refused)."""

    model_config = _STRICT
    schema_: Literal["harness.image-manifest/1"] = Field("harness.image-manifest/1", alias="schema")
    key: Sha256Hex
    recipe: dict[str, Any]
    kernel_release: str = Field(pattern=r"^[0-9a-z.+-]{1,64}$")
    modules: list[str]
    files: dict[str, FileDigest]
    installed_packages: InstalledPackagesDigest

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def digest_files(directory: Path) -> dict[str, FileDigest]:
    """Digest of each image file in `directory` (the staged bytes, at build time)."""
    return {
        name: FileDigest(
            sha256=sha256_file(directory / name), size=(directory / name).stat().st_size
        )
        for name in IMAGE_FILES
    }


def write_manifest(directory: Path, manifest: Manifest) -> None:
    (directory / MANIFEST_NAME).write_bytes(canonical(manifest.as_json()))


def _corrupt() -> ImageError:
    return ImageError("cache_corrupt", "adopt")


def read_manifest(directory: Path) -> Manifest:
    """Parse a manifest strictly; any deviation is `cache_corrupt`."""
    try:
        value = parse_canonical((directory / MANIFEST_NAME).read_bytes())
        manifest = Manifest.model_validate(value, by_alias=True)
    except (OSError, CanonicalError, ValidationError):
        raise _corrupt() from None
    if sorted(manifest.files) != sorted(IMAGE_FILES):
        raise _corrupt()
    return manifest


def verify_entry(directory: Path, expected_key: str) -> Manifest:
    """Check an image directory against its manifest and key; return the manifest."""
    manifest = read_manifest(directory)
    if manifest.key != expected_key or directory.name != expected_key:
        raise _corrupt()
    if hashlib.sha256(canonical(manifest.recipe)).hexdigest() != expected_key:
        raise _corrupt()
    present = sorted(p.name for p in directory.iterdir())
    if present != sorted([*IMAGE_FILES, MANIFEST_NAME]):
        raise _corrupt()
    for name, expected in manifest.files.items():
        path = directory / name
        if path.is_symlink() or not path.is_file():
            raise _corrupt()
        if path.stat().st_size != expected.size or sha256_file(path) != expected.sha256:
            raise _corrupt()
    return manifest
