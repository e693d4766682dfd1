"""The image recipe and its content key (docs/engineering.md §6).

Why a resolved recipe: package *names* do not determine an image, package *versions*
do. The recipe names every declared input with the version resolved from the image's
own apt sources (rootfs packages, the kernel package behind `linux-image-amd64`,
busybox-static), the host build tools' versions, the guest module list, the digests
of the init scripts and sshd config, the build options and `BUILDER_VERSION`. The key
is the SHA-256 of the recipe's canonical JSON. What it does *not* cover: versions of
transitive dependencies apt pulls in; the manifest records a digest of the installed
package list so a reviewer can compare two builds that share a key. The versions are
resolved once and recorded (resolution.py), so the key is computed offline.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from host.image.apt import AptSource
from host.image.digest import sha256_bytes
from host.image.errors import ImageError
from host.image.init_script import sshd_config, stage1_init, stage2_init
from host.image.initramfs import GUEST_MODULES
from host.image.tools import run_tool
from receipts.canonical import canonical

BUILDER_VERSION = 2
"""Bump when the builder changes what it produces for the same declared inputs."""

ROOTFS_PACKAGES: tuple[str, ...] = (
    "python3",
    "openssh-server",
    "libgomp1",
    "nodejs",
    "python3-pytest",
)
"""What the guest runs: python3 and its test runner, node, sshd, libgomp for llama.cpp."""

KERNEL_METAPACKAGE = "linux-image-amd64"
BUSYBOX_PACKAGE = "busybox-static"
HOST_TOOL_PACKAGES: tuple[str, ...] = ("mmdebstrap", "e2fsprogs", "qemu-utils", "kmod")

DPKG_PATH_EXCLUDES: tuple[str, ...] = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)
"""Documentation the guest never reads; copyright files stay."""

DISK_SIZE_BYTES = 4 << 30
"""The root filesystem's size; sparse, so the qcow2 base holds only what is used."""


def guest_script_digests() -> tuple[tuple[str, str], ...]:
    """Digests of the generated guest scripts and config (part of the key)."""
    return (
        ("init_stage1", sha256_bytes(stage1_init().encode("ascii"))),
        ("init_stage2", sha256_bytes(stage2_init().encode("ascii"))),
        ("sshd_config", sha256_bytes(sshd_config().encode("ascii"))),
    )


@dataclass(frozen=True)
class Recipe:
    """Every declared input of the image, versions resolved."""

    suite: str
    sources: tuple[AptSource, ...]
    packages: tuple[tuple[str, str], ...]
    kernel_package: str
    kernel_version: str
    busybox_version: str
    host_tools: tuple[tuple[str, str], ...]
    modules: tuple[str, ...] = GUEST_MODULES
    variant: str = "minbase"
    dpkg_options: tuple[str, ...] = DPKG_PATH_EXCLUDES
    disk_size_bytes: int = DISK_SIZE_BYTES
    builder_version: int = BUILDER_VERSION
    init_digests: tuple[tuple[str, str], ...] = field(default_factory=guest_script_digests)

    def as_json(self) -> dict[str, Any]:
        return {
            "builder_version": self.builder_version,
            "busybox": {"package": BUSYBOX_PACKAGE, "version": self.busybox_version},
            "disk_size_bytes": self.disk_size_bytes,
            "dpkg_options": list(self.dpkg_options),
            "host_tools": dict(self.host_tools),
            "init_digests": dict(self.init_digests),
            "kernel": {"package": self.kernel_package, "version": self.kernel_version},
            "modules": list(self.modules),
            "packages": dict(self.packages),
            "sources": [s.as_json() for s in self.sources],
            "suite": self.suite,
            "variant": self.variant,
        }

    def key(self) -> str:
        """SHA-256 of the recipe's canonical JSON: the image's identity."""
        return hashlib.sha256(canonical(self.as_json())).hexdigest()


def host_tool_versions() -> tuple[tuple[str, str], ...]:
    """Versions of the host packages whose programs write image bytes."""
    fmt = "${Package}\t${Version}\t${db:Status-Abbrev}\n"
    text = run_tool(
        ["dpkg-query", "-W", "-f", fmt, *HOST_TOOL_PACKAGES],
        category="build_failed",
        step="resolve",
    )
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, version, status = line.split("\t")
        if status.strip() == "ii":
            found[name] = version
    if set(found) != set(HOST_TOOL_PACKAGES):
        raise ImageError("build_failed", "resolve")
    return tuple(sorted(found.items()))
