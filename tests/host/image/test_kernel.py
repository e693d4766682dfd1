"""vmlinux extraction: boot-protocol payload, XZ, and the PVH note gate."""

from __future__ import annotations

import lzma
import struct
from pathlib import Path

import pytest

from host.image.errors import ImageError
from host.image.kernel import bzimage_payload, extract_vmlinux, has_pvh_entry


def make_elf(with_pvh: bool) -> bytes:
    """A minimal x86-64 ELF with one PT_NOTE segment."""
    name = b"Xen\x00"
    note_type = 18 if with_pvh else 17
    note = struct.pack("<III", len(name), 4, note_type) + name + struct.pack("<I", 0x1000000)
    ehdr_size, phdr_size = 64, 56
    note_offset = ehdr_size + phdr_size
    ehdr = bytearray(ehdr_size)
    ehdr[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<H", ehdr, 18, 62)  # EM_X86_64
    struct.pack_into("<Q", ehdr, 32, ehdr_size)  # e_phoff
    struct.pack_into("<HH", ehdr, 54, phdr_size, 1)  # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 4, 4, note_offset, 0, 0, len(note), len(note), 4)
    return bytes(ehdr) + phdr + note + b"\x00" * 4096


def make_bzimage(elf: bytes, setup_sects: int = 3) -> bytes:
    payload = lzma.compress(elf, format=lzma.FORMAT_XZ) + struct.pack("<I", len(elf))
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    pm_prefix = b"\x90" * 200  # decompressor code before the payload
    struct.pack_into("<I", setup, 0x248, len(pm_prefix))
    struct.pack_into("<I", setup, 0x24C, len(payload))
    return bytes(setup) + pm_prefix + payload + b"\x00" * 64


def test_extracts_the_elf_with_a_pvh_note(tmp_path: Path) -> None:
    elf = make_elf(with_pvh=True)
    bz = tmp_path / "vmlinuz"
    bz.write_bytes(make_bzimage(elf))
    extract_vmlinux(bz, tmp_path / "vmlinux")
    assert (tmp_path / "vmlinux").read_bytes() == elf


def test_refuses_a_kernel_without_pvh_entry(tmp_path: Path) -> None:
    bz = tmp_path / "vmlinuz"
    bz.write_bytes(make_bzimage(make_elf(with_pvh=False)))
    with pytest.raises(ImageError) as err:
        extract_vmlinux(bz, tmp_path / "vmlinux")
    assert err.value.category == "kernel_unavailable"
    assert not (tmp_path / "vmlinux").exists()


def test_pvh_note_detection() -> None:
    assert has_pvh_entry(make_elf(with_pvh=True))
    assert not has_pvh_entry(make_elf(with_pvh=False))
    assert not has_pvh_entry(b"MZ" + b"\x00" * 100)


def test_payload_is_located_by_the_header_not_by_magic_search() -> None:
    image = bytearray(make_bzimage(make_elf(with_pvh=True)))
    image[0x202:0x206] = b"XXXX"
    with pytest.raises(ImageError):
        bzimage_payload(bytes(image))
    truncated = make_bzimage(make_elf(with_pvh=True))[:-200]
    with pytest.raises(ImageError):
        bzimage_payload(truncated)
