"""The initramfs is byte-deterministic and holds what the init needs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from host.image import initramfs
from host.image.cpio import CpioEntry, write_newc
from host.image.errors import ImageError
from host.image.initramfs import initramfs_entries, parse_show_depends


def test_show_depends_parsing_keeps_modprobe_order(tmp_path: Path) -> None:
    mods = tmp_path / "lib/modules/6.1.0-57-amd64"
    text = (
        f"insmod {mods}/kernel/drivers/virtio/virtio_ring.ko \n"
        f"builtin crc32c\n"
        f"insmod {mods}/kernel/drivers/block/virtio_blk.ko \n"
    )
    parsed = parse_show_depends(text, mods)
    assert [m.relpath for m in parsed] == [
        "kernel/drivers/virtio/virtio_ring.ko",
        "kernel/drivers/block/virtio_blk.ko",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "insmod /elsewhere/virtio.ko",
        "insmod {mods}/kernel/x.ko opt=1",
        "install /bin/true",
        "insmod {mods}/kernel/x.ko.xz",
    ],
)
def test_show_depends_refuses_what_it_cannot_reproduce(line: str, tmp_path: Path) -> None:
    mods = tmp_path / "lib/modules/k"
    with pytest.raises(ImageError):
        parse_show_depends(line.format(mods=mods), mods)


def entries() -> list[CpioEntry]:
    return initramfs_entries(
        b"\x7fELF-busybox", [[("b.ko", b"B"), ("a.ko", b"A")], [("c.ko", b"C")]]
    )


def test_rebuilds_byte_identically() -> None:
    assert write_newc(entries()) == write_newc(entries())
    assert write_newc(entries()) == write_newc(list(reversed(entries())))


def test_archive_lists_with_cpio_with_fixed_metadata(tmp_path: Path) -> None:
    cpio = shutil.which("cpio")
    assert cpio is not None
    data = write_newc(entries())
    done = subprocess.run([cpio, "-itv", "--quiet"], input=data, capture_output=True, check=True)
    listing = done.stdout.decode().splitlines()
    names = [line.split()[-1] if "->" not in line else line.split()[-3] for line in listing]
    assert names == sorted(names)
    assert "init" in names and "dev/console" in names and "etc/modules.d/0" in names
    assert all(" root " in line and "1970" in line for line in listing)
    console = next(line for line in listing if line.endswith("dev/console"))
    assert console.startswith("crw-------") and "5,   1" in console


def test_modules_load_in_the_resolved_order_group_by_group() -> None:
    by_name = {e.name: e.data for e in entries()}
    assert by_name["etc/modules.d/0"] == b"b.ko\na.ko\n"
    assert by_name["etc/modules.d/1"] == b"c.ko\n"


def test_dependency_chains_sharing_a_module_form_one_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mods = tmp_path / "lib/modules/k"
    chains = {
        "blk": ["virtio_ring", "virtio", "virtio_blk"],
        "net": ["virtio_ring", "virtio", "failover", "virtio_net"],
        "ext4": ["crc16", "ext4"],
        "fw": ["qemu_fw_cfg"],
    }

    def fake_run_tool(argv: list[str], **_kw: object) -> str:
        return "".join(f"insmod {mods}/kernel/{m}.ko\n" for m in chains[argv[-1]])

    monkeypatch.setattr(initramfs, "run_tool", fake_run_tool)
    groups = initramfs.resolve_modules(tmp_path, "k", ("blk", "ext4", "net", "fw"))
    assert [[m.flat_name for m in g] for g in groups] == [
        ["crc16.ko", "ext4.ko"],
        ["virtio_ring.ko", "virtio.ko", "virtio_blk.ko", "failover.ko", "virtio_net.ko"],
        ["qemu_fw_cfg.ko"],
    ]


def test_cpio_refuses_duplicates_and_escaping_names() -> None:
    with pytest.raises(ValueError):
        write_newc([CpioEntry("a", "file"), CpioEntry("a", "file")])
    with pytest.raises(ValueError):
        CpioEntry("../etc/passwd", "file")
    with pytest.raises(ValueError):
        CpioEntry("/init", "file")
