"""The guest kernel: Debian's packaged kernel, unpacked, as an uncompressed vmlinux.

Why uncompressed: under TCG the bzImage's self-decompression costs ~4 s of every boot;
the ELF inside it boots directly through PVH (QEMU's `-kernel` on an ELF with a Xen
PHYS32_ENTRY note). The ELF is the bzImage's own XZ payload, located through the boot
protocol header (not by scanning for magic bytes), decompressed with Python's `lzma`,
and refused unless it is an x86-64 ELF carrying the PVH entry note: a kernel QEMU
cannot enter that way would otherwise fail at every boot instead of once, here.
"""

from __future__ import annotations

import lzma
import struct
from dataclasses import dataclass
from pathlib import Path

from host.image.errors import ImageError

_HDR_MAGIC_OFFSET = 0x202
_SETUP_SECTS_OFFSET = 0x1F1
_PAYLOAD_OFFSET = 0x248
_PAYLOAD_LENGTH = 0x24C
_XZ_MAGIC = b"\xfd7zXZ\x00"
_PT_NOTE = 4
_XEN_ELFNOTE_PHYS32_ENTRY = 18


@dataclass(frozen=True)
class KernelTree:
    """An unpacked kernel package: its release string, bzImage and module tree."""

    release: str
    bzimage: Path
    modules_root: Path
    """The directory that holds `lib/modules/<release>` (modprobe's `-d`)."""


def find_kernel(unpacked: Path) -> KernelTree:
    """The single `boot/vmlinuz-*` of an unpacked linux-image package."""
    images = sorted((unpacked / "boot").glob("vmlinuz-*"))
    if len(images) != 1:
        raise ImageError("kernel_unavailable", "kernel")
    release = images[0].name.removeprefix("vmlinuz-")
    if not (unpacked / "lib" / "modules" / release).is_dir():
        raise ImageError("kernel_unavailable", "kernel")
    return KernelTree(release=release, bzimage=images[0], modules_root=unpacked)


def bzimage_payload(bzimage: bytes) -> bytes:
    """The compressed payload of a bzImage, per the x86 boot protocol (>= 2.08)."""
    if len(bzimage) < 0x260 or bzimage[_HDR_MAGIC_OFFSET : _HDR_MAGIC_OFFSET + 4] != b"HdrS":
        raise ImageError("kernel_unavailable", "kernel")
    setup_sects = bzimage[_SETUP_SECTS_OFFSET] or 4
    (payload_offset,) = struct.unpack_from("<I", bzimage, _PAYLOAD_OFFSET)
    (payload_length,) = struct.unpack_from("<I", bzimage, _PAYLOAD_LENGTH)
    start = (setup_sects + 1) * 512 + payload_offset
    payload = bzimage[start : start + payload_length]
    if len(payload) != payload_length or not payload.startswith(_XZ_MAGIC):
        raise ImageError("kernel_unavailable", "kernel")
    return payload


def decompress_payload(payload: bytes) -> bytes:
    """XZ-decompress the payload; the kernel appends its size after the stream."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        elf = decompressor.decompress(payload)
    except lzma.LZMAError:
        raise ImageError("kernel_unavailable", "kernel") from None
    if not decompressor.eof:
        raise ImageError("kernel_unavailable", "kernel")
    return elf


def has_pvh_entry(elf: bytes) -> bool:
    """Whether `elf` is an x86-64 ELF with a Xen PHYS32_ENTRY note (PVH boot)."""
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return False
    (machine,) = struct.unpack_from("<H", elf, 18)
    if machine != 62:  # EM_X86_64
        return False
    (phoff,) = struct.unpack_from("<Q", elf, 32)
    phentsize, phnum = struct.unpack_from("<HH", elf, 54)
    for index in range(phnum):
        base = phoff + index * phentsize
        if base + 56 > len(elf):
            return False
        p_type, _flags, p_offset = struct.unpack_from("<IIQ", elf, base)
        (p_filesz,) = struct.unpack_from("<Q", elf, base + 32)
        if p_type == _PT_NOTE and _notes_have_pvh(elf[p_offset : p_offset + p_filesz]):
            return True
    return False


def _notes_have_pvh(notes: bytes) -> bool:
    pos = 0
    while pos + 12 <= len(notes):
        namesz, descsz, note_type = struct.unpack_from("<III", notes, pos)
        pos += 12
        name = notes[pos : pos + namesz]
        pos += (namesz + 3) & ~3
        pos += (descsz + 3) & ~3
        if name == b"Xen\x00" and note_type == _XEN_ELFNOTE_PHYS32_ENTRY:
            return True
    return False


def extract_vmlinux(bzimage: Path, dest: Path) -> None:
    """Write the bzImage's uncompressed, PVH-bootable ELF to `dest`."""
    elf = decompress_payload(bzimage_payload(bzimage.read_bytes()))
    if not has_pvh_entry(elf):
        raise ImageError("kernel_unavailable", "kernel")
    dest.write_bytes(elf)
