"""The real image: built or adopted by key, rebuilt identically, refused when corrupted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from host.image import ImageError, ensure_image
from host.image.apt import PrivateApt
from host.image.digest import sha256_file
from host.image.initramfs import build_initramfs
from host.image.kernel import extract_vmlinux, find_kernel
from host.image.manifest import INITRAMFS_NAME, verify_entry
from host.image.recipe import BUSYBOX_PACKAGE
from tests.host.image.support import image_root, session_image, session_recipe

pytestmark = pytest.mark.integration


def test_image_is_keyed_by_its_recipe_and_adopted_on_the_second_call() -> None:
    first = session_image()
    recipe = session_recipe()
    assert first.key == recipe.key() == first.directory.name
    assert first.manifest.recipe == recipe.as_json()
    again = ensure_image(image_root(), recipe)
    assert again.provenance == "adopted_from_cache"
    assert (again.key, again.base_sha256) == (first.key, first.base_sha256)
    record = again.to_record()
    assert record.category == "ok" and record.kernel_package == recipe.kernel_package
    assert dict(recipe.packages).keys() >= {"python3", "openssh-server", "nodejs"}


def test_kernel_and_initramfs_rebuild_byte_identically(tmp_path: Path) -> None:
    image = session_image()
    recipe = session_recipe()
    apt = PrivateApt(image_root() / ".apt", recipe.sources)
    debs = tmp_path / "debs"
    debs.mkdir()
    kernel_deb = apt.download(recipe.kernel_package, recipe.kernel_version, debs, "build_failed")
    busybox_deb = apt.download(BUSYBOX_PACKAGE, recipe.busybox_version, debs, "build_failed")
    for deb, dest in ((kernel_deb, tmp_path / "k"), (busybox_deb, tmp_path / "b")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    tree = find_kernel(tmp_path / "k")
    extract_vmlinux(tree.bzimage, tmp_path / "vmlinux")
    modules = build_initramfs(
        tmp_path / "b" / "bin" / "busybox", tree.modules_root, tree.release, tmp_path / "i.cpio"
    )
    assert sha256_file(tmp_path / "vmlinux") == image.kernel_sha256
    assert sha256_file(tmp_path / "i.cpio") == image.initramfs_sha256
    assert modules == image.manifest.modules
    assert {"virtio_pci.ko", "virtio_blk.ko", "virtio_net.ko", "ext4.ko", "qemu_fw_cfg.ko"} <= set(
        modules
    )


def test_a_corrupted_copy_of_the_real_entry_is_refused(tmp_path: Path) -> None:
    image = session_image()
    copy = tmp_path / image.key
    shutil.copytree(image.directory, copy)
    verify_entry(copy, image.key)
    target = copy / INITRAMFS_NAME
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(ImageError) as err:
        ensure_image(tmp_path, session_recipe())
    assert err.value.category == "cache_corrupt"
