"""The recipe key: deterministic, canonical, and sensitive to every declared input."""

from __future__ import annotations

import dataclasses
import hashlib
import typing

import pytest

from host.image.apt import AptSource, bookworm_sources, parse_depends, parse_policy
from host.image.categories import ImageFailure
from host.image.errors import ImageError
from host.image.recipe import Recipe, guest_script_digests
from host.image.rootfs import mmdebstrap_argv
from receipts.canonical import canonical
from receipts.records.image import ImageCategory


def make_recipe(**changes: typing.Any) -> Recipe:
    base = Recipe(
        suite="bookworm",
        sources=bookworm_sources(),
        packages=(("python3", "3.11.2-1+b1"), ("openssh-server", "1:9.2p1-2+deb12u10")),
        kernel_package="linux-image-6.1.0-57-amd64",
        kernel_version="6.1.192-3",
        busybox_version="1:1.35.0-4+deb12u1+b1",
        host_tools=(("e2fsprogs", "1.47.0-2"), ("mmdebstrap", "1.3.5")),
    )
    return dataclasses.replace(base, **changes)


def test_key_is_sha256_of_canonical_recipe() -> None:
    recipe = make_recipe()
    assert recipe.key() == hashlib.sha256(canonical(recipe.as_json())).hexdigest()
    assert recipe.key() == make_recipe().key()


@pytest.mark.parametrize(
    "change",
    [
        {"packages": (("python3", "3.11.2-1+b2"), ("openssh-server", "1:9.2p1-2+deb12u10"))},
        {"packages": (("python3", "3.11.2-1+b1"),)},
        {"kernel_package": "linux-image-6.1.0-58-amd64"},
        {"kernel_version": "6.1.193-1"},
        {"busybox_version": "1:1.35.0-4+deb12u2"},
        {"host_tools": (("e2fsprogs", "1.47.0-3"), ("mmdebstrap", "1.3.5"))},
        {"modules": ("virtio_pci",)},
        {"suite": "trixie"},
        {"sources": (AptSource("http://example.invalid/debian", "bookworm"),)},
        {"dpkg_options": ()},
        {"disk_size_bytes": 8 << 30},
        {"builder_version": 99},
        {"init_digests": (("init_stage1", "0" * 64),)},
    ],
)
def test_every_input_changes_the_key(change: dict[str, typing.Any]) -> None:
    assert make_recipe(**change).key() != make_recipe().key()


def test_init_script_digests_are_in_the_key() -> None:
    names = dict(guest_script_digests())
    assert set(names) == {"init_stage1", "init_stage2", "sshd_config"}
    assert make_recipe().as_json()["init_digests"] == names


def test_mmdebstrap_installs_exact_versions_from_the_recipe_sources() -> None:
    recipe = make_recipe()
    argv = mmdebstrap_argv(recipe, __import__("pathlib").Path("/x/rootfs"))
    assert "--include=python3=3.11.2-1+b1,openssh-server=1:9.2p1-2+deb12u10" in argv
    assert "--variant=minbase" in argv
    assert argv[-3:] == [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]


def test_parse_policy_requires_a_candidate_for_every_package() -> None:
    text = "python3:\n  Installed: (none)\n  Candidate: 3.11.2-1+b1\nnodejs:\n  Candidate: (none)\n"
    assert parse_policy(text, ["python3"]) == {"python3": "3.11.2-1+b1"}
    with pytest.raises(ImageError) as err:
        parse_policy(text, ["python3", "nodejs"])
    assert err.value.category == "build_failed"


def test_parse_depends_takes_real_packages_only() -> None:
    text = "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n  Depends: <virtual>\n"
    assert parse_depends(text) == ["linux-image-6.1.0-57-amd64"]


def test_failure_categories_are_image_record_categories() -> None:
    assert set(typing.get_args(ImageFailure)) == set(typing.get_args(ImageCategory)) - {"ok"}
