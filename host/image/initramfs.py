"""The initramfs: busybox-static, the resolved kernel modules and the stage-1 init.

Why an initramfs at all: Debian builds every driver the guest needs as a module
(virtio_pci, virtio_blk, virtio_net, ext4, qemu_fw_cfg...), so the kernel cannot
mount its root without help. Dependencies are resolved by kmod itself
(`modprobe -d ROOT -S KVER --show-depends`, after `depmod -b ROOT KVER`) instead of a
hand-kept list, so a kernel update that adds a dependency is followed automatically.
The archive is uncompressed (the kernel need not decompress it under TCG) and
deterministic (see cpio.py): the same inputs give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from host.image.cpio import CpioEntry, write_newc
from host.image.errors import ImageError
from host.image.init_script import BUSYBOX_APPLETS, MODULES_DIR, stage1_init
from host.image.tools import run_tool

GUEST_MODULES: tuple[str, ...] = (
    "virtio_pci",
    "virtio_blk",
    "virtio_net",
    "virtio_rng",
    "virtio_console",
    "crc32c_generic",
    "ext4",
    "qemu_fw_cfg",
)
"""What the guest must load; dependencies are added by modprobe, in its order."""


@dataclass(frozen=True)
class ResolvedModule:
    """One module file, relative to `lib/modules/<release>/`."""

    relpath: str

    @property
    def flat_name(self) -> str:
        return Path(self.relpath).name


def depmod(modules_root: Path, release: str) -> None:
    """Generate modules.dep for the unpacked tree (the package ships none)."""
    run_tool(
        ["depmod", "-b", str(modules_root), release],
        category="kernel_unavailable",
        step="initramfs",
    )


def parse_show_depends(text: str, modules_dir: Path) -> list[ResolvedModule]:
    """`insmod /abs/path.ko [opts]` lines → module paths relative to `modules_dir`."""
    resolved: list[ResolvedModule] = []
    prefix = str(modules_dir).rstrip("/") + "/"
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "builtin":
            continue
        if parts[0] != "insmod" or len(parts) < 2 or not parts[1].startswith(prefix):
            raise ImageError("kernel_unavailable", "initramfs")
        if len(parts) > 2:  # module options from a modprobe.d we do not ship: refuse
            raise ImageError("kernel_unavailable", "initramfs")
        rel = parts[1][len(prefix) :]
        if not rel.endswith(".ko"):
            raise ImageError("kernel_unavailable", "initramfs")
        resolved.append(ResolvedModule(rel))
    return resolved


def resolve_modules(
    modules_root: Path, release: str, wanted: tuple[str, ...] = GUEST_MODULES
) -> list[list[ResolvedModule]]:
    """Every module file needed for `wanted`, in independent groups, each once.

    Each wanted module brings its dependency chain (modprobe's order). Chains that
    share a module are merged (earlier group first, then the new modules in order),
    so groups never depend on each other and can be loaded concurrently.
    """
    modules_dir = modules_root / "lib" / "modules" / release
    groups: list[list[ResolvedModule]] = []
    for name in wanted:
        text = run_tool(
            ["modprobe", "-d", str(modules_root), "-S", release, "--show-depends", name],
            category="kernel_unavailable",
            step="initramfs",
        )
        chain = parse_show_depends(text, modules_dir)
        paths = {m.relpath for m in chain}
        touching = [g for g in groups if paths & {m.relpath for m in g}]
        merged: list[ResolvedModule] = [m for g in touching for m in g]
        seen = {m.relpath for m in merged}
        for module in chain:
            if module.relpath not in seen:
                seen.add(module.relpath)
                merged.append(module)
        groups = [g for g in groups if g not in touching] + [merged]
    flat = [m.flat_name for g in groups for m in g]
    if len(set(flat)) != len(flat):
        raise ImageError("kernel_unavailable", "initramfs")
    return groups


def initramfs_entries(busybox: bytes, groups: list[list[tuple[str, bytes]]]) -> list[CpioEntry]:
    """The archive's members: directories, busybox and its applets, modules, init."""
    entries = [
        CpioEntry(d, "dir", 0o755)
        for d in ("bin", "dev", "etc", MODULES_DIR, "lib", "lib/modules", "newroot", "proc", "sys")
    ]
    entries.append(CpioEntry("dev/console", "chardev", 0o600, rdev=(5, 1)))
    entries.append(CpioEntry("bin/busybox", "file", 0o755, busybox))
    entries += [CpioEntry(f"bin/{a}", "symlink", 0o777, b"busybox") for a in BUSYBOX_APPLETS]
    for index, group in enumerate(groups):
        for name, data in group:
            entries.append(CpioEntry(f"lib/modules/{name}", "file", 0o644, data))
        order = "".join(f"{name}\n" for name, _ in group).encode("ascii")
        entries.append(CpioEntry(f"{MODULES_DIR}/{index}", "file", 0o644, order))
    entries.append(CpioEntry("init", "file", 0o755, stage1_init().encode("ascii")))
    return entries


def build_initramfs(busybox: Path, modules_root: Path, release: str, dest: Path) -> list[str]:
    """Write the initramfs to `dest`; return the module file names, group by group."""
    depmod(modules_root, release)
    groups = resolve_modules(modules_root, release)
    modules_dir = modules_root / "lib" / "modules" / release
    payload = [
        [(m.flat_name, (modules_dir / m.relpath).read_bytes()) for m in group] for group in groups
    ]
    data = busybox.read_bytes()
    if not data.startswith(b"\x7fELF"):
        raise ImageError("build_failed", "initramfs")
    dest.write_bytes(write_newc(initramfs_entries(data, payload)))
    return [name for group in payload for name, _ in group]
