"""The guest root filesystem: mmdebstrap minbase with pinned versions, then ours.

Why pinned: the recipe resolved each package's version; installing `name=version`
makes apt fail if the mirror moved on between resolution and build, instead of
silently producing an image that does not match its key. After mmdebstrap the tree
is adjusted: the host keys openssh-server generated at install time are deleted
(every image would otherwise share them; the real key arrives per trial through
fw_cfg), the sshd config and stage-2 init are written, and what mmdebstrap copied
from the host (hostname, resolv.conf) is replaced.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from host.image.contract import READ_ONLY_MOUNT, SSHD_CONFIG_PATH, STAGE2_PATH
from host.image.errors import ImageError
from host.image.init_script import sshd_config, stage2_init
from host.image.recipe import Recipe
from host.image.tools import run_tool

GUEST_HOSTNAME = "harness-guest"


@dataclass(frozen=True)
class InstalledPackages:
    """The rootfs's dpkg database, summarized: count and digest of the sorted list."""

    count: int
    sha256: str


def mmdebstrap_argv(recipe: Recipe, target: Path) -> list[str]:
    """The mmdebstrap command for `recipe` (pure; unit-tested)."""
    includes = ",".join(f"{name}={version}" for name, version in recipe.packages)
    argv = [
        "mmdebstrap",
        f"--variant={recipe.variant}",
        "--mode=root",
        "--format=directory",
        f"--include={includes}",
        '--aptopt=Acquire::Retries "3"',
    ]
    argv += [f"--dpkgopt={opt}" for opt in recipe.dpkg_options]
    argv += [recipe.suite, str(target)]
    argv += [f"deb {s.uri} {s.suite} {' '.join(s.components)}" for s in recipe.sources]
    return argv


def run_mmdebstrap(recipe: Recipe, target: Path) -> None:
    run_tool(
        mmdebstrap_argv(recipe, target), category="rootfs_failed", step="rootfs", timeout_s=1800.0
    )


def _write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text(text, encoding="ascii")
    os.chmod(path, mode)


def customize(root: Path) -> None:
    """Make the mmdebstrap tree the harness guest."""
    ssh_dir = root / "etc" / "ssh"
    for key in ssh_dir.glob("ssh_host_*"):
        key.unlink()
    _write(root / SSHD_CONFIG_PATH, sshd_config(), 0o644)
    _write(root / STAGE2_PATH, stage2_init(), 0o755)
    (root / READ_ONLY_MOUNT.lstrip("/")).mkdir(mode=0o755, parents=True, exist_ok=True)
    _write(root / "etc" / "hostname", f"{GUEST_HOSTNAME}\n", 0o644)
    _write(root / "etc" / "hosts", f"127.0.0.1 localhost\n127.0.1.1 {GUEST_HOSTNAME}\n", 0o644)
    resolv = root / "etc" / "resolv.conf"
    if resolv.exists() or resolv.is_symlink():
        resolv.unlink()
    if any(ssh_dir.glob("ssh_host_*")):
        raise ImageError("rootfs_failed", "rootfs")


def installed_packages(root: Path, recipe: Recipe) -> InstalledPackages:
    """Read the rootfs's dpkg database; refuse if a recipe package is not at its version."""
    fmt = "${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\n"
    text = run_tool(
        ["dpkg-query", f"--admindir={root / 'var' / 'lib' / 'dpkg'}", "-W", "-f", fmt],
        category="rootfs_failed",
        step="rootfs",
    )
    rows = sorted(line for line in text.splitlines() if line.strip())
    installed: dict[str, str] = {}
    for row in rows:
        name, version, _arch, status = row.split("\t")
        if status.strip() == "ii":
            installed[name] = version
    for name, version in recipe.packages:
        if installed.get(name) != version:
            raise ImageError("rootfs_failed", "rootfs")
    listing = "".join(row + "\n" for row in rows).encode("utf-8")
    return InstalledPackages(count=len(rows), sha256=hashlib.sha256(listing).hexdigest())
