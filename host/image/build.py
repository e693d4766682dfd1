"""`harness image build`: find the recipe, adopt the cached image or build it.

Why this shape: the key is computed before anything is built, from versions resolved
through the private apt and recorded (resolution.py), so a cache hit needs no network
at all: the recorded resolution gives the key, and adopting re-hashes the entry. Only
a miss (no record, no entry for its key, or `refresh`) asks the mirror again; the new
answer is recorded once the image for it exists. A miss builds into a staging
directory that becomes `<root>/<key>` with one rename (docs/engineering.md §5).
Builds are serialized by a lock file in the cache root so two sessions never build
the same key at once. Provenance is recorded apart from the key:
`built_by_this_run` or `adopted_from_cache`. A corrupted entry is refused
(`cache_corrupt`), never rebuilt over: a human decides what happened to it.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from host.image.apt import PrivateApt, bookworm_sources
from host.image.disk import convert_to_qcow2, make_ext4
from host.image.errors import ImageError, category_for_oserror
from host.image.initramfs import build_initramfs
from host.image.kernel import extract_vmlinux, find_kernel
from host.image.manifest import (
    BASE_NAME,
    INITRAMFS_NAME,
    VMLINUX_NAME,
    Manifest,
    digest_files,
    verify_entry,
    write_manifest,
)
from host.image.recipe import BUSYBOX_PACKAGE, Recipe
from host.image.resolution import (
    load_resolution,
    recipe_for,
    record_resolution,
    resolution_request,
    resolve,
)
from host.image.rootfs import customize, installed_packages, run_mmdebstrap
from host.image.tools import run_tool
from receipts.records.image import ImageRecord
from receipts.staging import hold_lock, is_staging_name, remove_if_dead, staged_directory
from receipts.types import Provenance

log = logging.getLogger(__name__)


def default_image_root() -> Path:
    """``~/.cache/harness/images``."""
    return Path.home() / ".cache" / "harness" / "images"


@dataclass(frozen=True)
class GuestImage:
    """A verified image: its files, digests, and whether this run built it."""

    key: str
    directory: Path
    provenance: Provenance
    kernel_package: str
    kernel_version: str
    kernel_release: str
    manifest: Manifest
    build_ms: int

    @property
    def vmlinux(self) -> Path:
        return self.directory / VMLINUX_NAME

    @property
    def initramfs(self) -> Path:
        return self.directory / INITRAMFS_NAME

    @property
    def base(self) -> Path:
        return self.directory / BASE_NAME

    @property
    def kernel_sha256(self) -> str:
        return self.manifest.files[VMLINUX_NAME].sha256

    @property
    def initramfs_sha256(self) -> str:
        return self.manifest.files[INITRAMFS_NAME].sha256

    @property
    def base_sha256(self) -> str:
        return self.manifest.files[BASE_NAME].sha256

    @property
    def base_size_bytes(self) -> int:
        return self.manifest.files[BASE_NAME].size

    def to_record(self) -> ImageRecord:
        return ImageRecord(
            category="ok",
            image_key=self.key,
            provenance=self.provenance,
            kernel_package=self.kernel_package,
            kernel_sha256=self.kernel_sha256,
            initramfs_sha256=self.initramfs_sha256,
            base_sha256=self.base_sha256,
            base_size_bytes=self.base_size_bytes,
            build_ms=self.build_ms,
        )


def failure_record(error: ImageError, build_ms: int, key: str | None = None) -> ImageRecord:
    """The image record of a failed stage: a category and nothing else."""
    return ImageRecord(
        category=error.category,
        image_key=key,
        provenance=None,
        kernel_package=None,
        kernel_sha256=None,
        initramfs_sha256=None,
        base_sha256=None,
        base_size_bytes=None,
        build_ms=build_ms,
    )


def sweep_stale(root: Path) -> list[str]:
    """Remove work and staging directories of killed builds; call with the lock held.

    Holding the lock means no build is running here, so every `.work-*` directory is a
    leftover; a staging directory is removed only when no live filler holds its own lock
    (`receipts.staging.remove_if_dead`). Returns the names removed.
    """
    removed = []
    for path in root.iterdir():
        name = path.name
        if not path.is_dir() or path.is_symlink():
            continue
        if name.startswith(".work-"):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
        elif is_staging_name(name) and remove_if_dead(path):
            removed.append(name)
    return sorted(removed)


def _unpack_deb(deb: Path, dest: Path) -> None:
    run_tool(
        ["dpkg-deb", "-x", str(deb), str(dest)],
        category="kernel_unavailable",
        step="kernel",
        timeout_s=600.0,
    )


class _StepLog:
    """Logs how long each build step took (logs only; the record has build_ms)."""

    def __init__(self) -> None:
        self._last = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        log.info("image build step %s: %.1f s", name, now - self._last)
        self._last = now


def build_into(recipe: Recipe, apt: PrivateApt, content: Path, work: Path) -> Manifest:
    """Build every image file into `content` (a staging directory), using `work`."""
    step = _StepLog()
    debs = work / "debs"
    debs.mkdir()
    kernel_deb = apt.download(
        recipe.kernel_package, recipe.kernel_version, debs, "kernel_unavailable"
    )
    busybox_deb = apt.download(BUSYBOX_PACKAGE, recipe.busybox_version, debs, "build_failed")
    kroot, bbroot = work / "kernel", work / "busybox"
    kroot.mkdir()
    bbroot.mkdir()
    _unpack_deb(kernel_deb, kroot)
    _unpack_deb(busybox_deb, bbroot)
    step.done("download+unpack")
    tree = find_kernel(kroot)
    extract_vmlinux(tree.bzimage, content / VMLINUX_NAME)
    modules = build_initramfs(
        bbroot / "bin" / "busybox", tree.modules_root, tree.release, content / INITRAMFS_NAME
    )
    shutil.rmtree(kroot)
    step.done("kernel+initramfs")
    rootfs = work / "rootfs"
    run_mmdebstrap(recipe, rootfs)
    customize(rootfs)
    packages = installed_packages(rootfs, recipe)
    step.done("mmdebstrap")
    raw = work / "base.ext4"
    make_ext4(rootfs, raw, recipe.disk_size_bytes, journal=True, label="harness-root")
    convert_to_qcow2(raw, content / BASE_NAME)
    (content / BASE_NAME).chmod(0o444)
    step.done("mkfs+qcow2")
    manifest = Manifest.model_validate(
        {
            "schema": "harness.image-manifest/1",
            "key": recipe.key(),
            "recipe": recipe.as_json(),
            "kernel_release": tree.release,
            "modules": list(modules),
            "files": digest_files(content),
            "installed_packages": {"count": packages.count, "sha256": packages.sha256},
        },
        by_alias=True,
    )
    write_manifest(content, manifest)
    return manifest


def _result(
    recipe: Recipe, directory: Path, manifest: Manifest, provenance: Provenance, started: float
) -> GuestImage:
    return GuestImage(
        key=manifest.key,
        directory=directory,
        provenance=provenance,
        kernel_package=recipe.kernel_package,
        kernel_version=recipe.kernel_version,
        kernel_release=manifest.kernel_release,
        manifest=manifest,
        build_ms=int((time.monotonic() - started) * 1000),
    )


def recorded_recipe(root: Path) -> Recipe | None:
    """The recipe of the recorded resolution for today's request (offline), or None."""
    resolution = load_resolution(root, resolution_request())
    return recipe_for(resolution) if resolution is not None else None


def _adopt_or_build(root: Path, recipe: Recipe, started: float) -> GuestImage:
    key = recipe.key()
    target = root / key
    if target.exists():
        manifest = verify_entry(target, key)
        return _result(recipe, target, manifest, "adopted_from_cache", started)
    apt = PrivateApt(root / ".apt", recipe.sources)
    work = root / f".work-{key}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        with staged_directory(target) as content:
            manifest = build_into(recipe, apt, content, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _result(recipe, target, manifest, "built_by_this_run", started)


def ensure_image(
    root: Path | None = None, recipe: Recipe | None = None, *, refresh: bool = False
) -> GuestImage:
    """Adopt the image for the recipe from `root`, or build and stage it.

    Without a `recipe`, the recorded resolution names it, and the mirror is asked
    (network) only when there is none, when no entry exists for its key, or when
    `refresh` asks for today's versions."""
    started = time.monotonic()
    root = (root or default_image_root()).absolute()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with hold_lock(root / ".lock", "the guest image (a build takes minutes)"):
            sweep_stale(root)
            fresh = None
            if recipe is None:
                recipe = None if refresh else recorded_recipe(root)
                if recipe is None or not (root / recipe.key()).exists():
                    fresh = resolve(PrivateApt(root / ".apt", bookworm_sources()))
                    recipe = recipe_for(fresh)
            image = _adopt_or_build(root, recipe, started)
            if fresh is not None:
                record_resolution(root, fresh)
            return image
    except OSError as exc:
        log.warning("image stage failed: %s", exc)
        raise ImageError(category_for_oserror(exc, "build_failed"), "disk") from None
