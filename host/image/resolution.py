"""The image's apt resolution, recorded once so a warm machine computes its key offline.

Why record it: the image key (recipe.py) names the Debian *versions* the image holds,
and only the mirror can say which versions `python3` or `linux-image-amd64` mean today.
Asking it on every trial made every trial need the network (`apt-get update`, ~4 s)
and made the key a live lookup. Here the answer is resolved once (at set-up, on the
first build, or on `harness image build --refresh`), written to
`<image root>/.resolved/<request key>.json`, and read back by every later trial.

What identity means here (docs/engineering.md §6): the image key is unchanged, the
SHA-256 of the recipe with its resolved versions. The recorded resolution is one of
the recipe's declared inputs, pinned when it was asked, so a trial offline computes
the same key the build computed and adopts that entry (re-hashed against its
manifest). The *request* (suite, sources, architecture, package names) keys the
record: change a package list or a source and the record no longer answers it, so
the next build resolves again. Chosen trade-off: a machine keeps the image it
resolved until someone asks again; a Debian security update reaches the image on
`harness image build --refresh` (or on the next build of a key that is not cached),
not silently between two trials. The receipt's image key says which one ran.

The record is a pointer, not an artifact: it is replaced (write, fsync, rename) when
a refresh resolves differently. Reading it is strict: anything that is not the
canonical JSON of this closed model for today's request is `cache_corrupt`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from host.image.apt import AptSource, PrivateApt, bookworm_sources, valid_version
from host.image.errors import ImageError
from host.image.recipe import (
    BUSYBOX_PACKAGE,
    KERNEL_METAPACKAGE,
    ROOTFS_PACKAGES,
    Recipe,
    host_tool_versions,
)
from host.model.keys import content_key
from receipts.canonical import CanonicalError, canonical, parse_canonical
from receipts.types import DebianPackage, Sha256Hex

RESOLVED_DIR = ".resolved"
ARCHITECTURE = "amd64"


class Resolution(BaseModel):
    """What the image's apt sources answered for one request, when it was asked."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    schema_: Literal["harness.image-resolution/1"] = Field(
        "harness.image-resolution/1", alias="schema"
    )
    request_key: Sha256Hex
    request: dict[str, Any]
    kernel_package: DebianPackage
    versions: dict[str, str]
    """Version of every rootfs package, the kernel package and busybox-static."""

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def resolution_request(
    suite: str = "bookworm", sources: tuple[AptSource, ...] | None = None
) -> dict[str, Any]:
    """Everything the resolution depends on but the mirror's state (its key's inputs)."""
    return {
        "architecture": ARCHITECTURE,
        "busybox_package": BUSYBOX_PACKAGE,
        "kernel_metapackage": KERNEL_METAPACKAGE,
        "rootfs_packages": list(ROOTFS_PACKAGES),
        "sources": [s.as_json() for s in (sources if sources is not None else bookworm_sources())],
        "suite": suite,
    }


def resolve(
    apt: PrivateApt, suite: str = "bookworm", sources: tuple[AptSource, ...] | None = None
) -> Resolution:
    """Ask the mirror (needs the network: `apt-get update`, then apt-cache)."""
    apt.update()
    kernels = [d for d in apt.depends(KERNEL_METAPACKAGE) if d.startswith("linux-image-")]
    if len(kernels) != 1:
        raise ImageError("kernel_unavailable", "resolve")
    versions = apt.candidate_versions([*ROOTFS_PACKAGES, kernels[0], BUSYBOX_PACKAGE])
    request = resolution_request(suite, sources)
    return Resolution.model_validate(
        {
            "schema": "harness.image-resolution/1",
            "request_key": content_key(request),
            "request": request,
            "kernel_package": kernels[0],
            "versions": versions,
        },
        by_alias=True,
    )


def recipe_for(
    resolution: Resolution, suite: str = "bookworm", sources: tuple[AptSource, ...] | None = None
) -> Recipe:
    """The recipe a resolution answers (offline: host tools come from the local dpkg)."""
    versions = resolution.versions
    return Recipe(
        suite=suite,
        sources=sources if sources is not None else bookworm_sources(),
        packages=tuple((p, versions[p]) for p in ROOTFS_PACKAGES),
        kernel_package=resolution.kernel_package,
        kernel_version=versions[resolution.kernel_package],
        busybox_version=versions[BUSYBOX_PACKAGE],
        host_tools=host_tool_versions(),
    )


def resolve_recipe(
    apt: PrivateApt, suite: str = "bookworm", sources: tuple[AptSource, ...] | None = None
) -> Recipe:
    """Resolve afresh and return the recipe (needs the network)."""
    return recipe_for(resolve(apt, suite, sources), suite, sources)


def _record_path(root: Path, request_key: str) -> Path:
    return root / RESOLVED_DIR / f"{request_key}.json"


def _corrupt() -> ImageError:
    return ImageError("cache_corrupt", "resolve")


def load_resolution(root: Path, request: dict[str, Any]) -> Resolution | None:
    """The recorded answer to `request`, None when none was recorded; strict."""
    key = content_key(request)
    path = _record_path(root, key)
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        raise _corrupt()
    try:
        resolution = Resolution.model_validate(parse_canonical(path.read_bytes()), by_alias=True)
    except (OSError, CanonicalError, ValidationError):
        raise _corrupt() from None
    expected = {*ROOTFS_PACKAGES, resolution.kernel_package, BUSYBOX_PACKAGE}
    if resolution.request_key != key or content_key(resolution.request) != key:
        raise _corrupt()
    if not resolution.kernel_package.startswith("linux-image-"):
        raise _corrupt()
    if set(resolution.versions) != expected:
        raise _corrupt()
    try:
        for version in resolution.versions.values():
            valid_version(version)
    except ImageError:
        raise _corrupt() from None
    return resolution


def record_resolution(root: Path, resolution: Resolution) -> None:
    """Write (or replace) the record for its request: temp file, fsync, rename."""
    path = _record_path(root, resolution.request_key)
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(canonical(resolution.as_json()))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
