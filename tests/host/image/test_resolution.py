"""The recorded apt resolution: the image key is computed, and the image adopted, offline.

The offline cases run `ensure_image` in a new network namespace (`unshare -n`: no
interface but a downed loopback), so "no network" is the kernel's fact, not a stub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from host.image.apt import AptSource, bookworm_sources
from host.image.errors import ImageError
from host.image.recipe import BUSYBOX_PACKAGE, ROOTFS_PACKAGES, Recipe, host_tool_versions
from host.image.resolution import (
    RESOLVED_DIR,
    Resolution,
    load_resolution,
    recipe_for,
    record_resolution,
    resolution_request,
)
from host.model.keys import content_key
from receipts.canonical import canonical
from tests.host.image.test_manifest import fake_entry

KERNEL = "linux-image-6.1.0-57-amd64"
VERSIONS = {
    "python3": "3.11.2-1+b1",
    "openssh-server": "1:9.2p1-2+deb12u10",
    "libgomp1": "12.2.0-14+deb12u1",
    "nodejs": "18.20.4+dfsg-1~deb12u1",
    "python3-pytest": "7.2.1-2",
    KERNEL: "6.1.192-3",
    BUSYBOX_PACKAGE: "1:1.35.0-4+deb12u1+b1",
}

_ENSURE = """
import json, sys
from pathlib import Path
from host.image.build import ensure_image
from host.image.errors import ImageError
try:
    image = ensure_image(Path(sys.argv[1]), refresh=sys.argv[2] == "refresh")
    print(json.dumps({"key": image.key, "provenance": image.provenance}))
except ImageError as exc:
    print(json.dumps({"category": exc.category}))
"""


def make_resolution(**versions: str) -> Resolution:
    request = resolution_request()
    return Resolution.model_validate(
        {
            "schema": "harness.image-resolution/1",
            "request_key": content_key(request),
            "request": request,
            "kernel_package": KERNEL,
            "versions": {**VERSIONS, **versions},
        },
        by_alias=True,
    )


def ensure_offline(root: Path, refresh: bool = False) -> dict[str, str]:
    """`ensure_image(root)` in a process with no network at all."""
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", _ENSURE, str(root), "refresh" if refresh else ""],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, str] = json.loads(done.stdout)
    return result


def record_path(root: Path) -> Path:
    return root / RESOLVED_DIR / f"{content_key(resolution_request())}.json"


def test_the_recipe_takes_every_version_from_the_resolution() -> None:
    recipe = recipe_for(make_resolution())
    expected = Recipe(
        suite="bookworm",
        sources=bookworm_sources(),
        packages=tuple((name, VERSIONS[name]) for name in ROOTFS_PACKAGES),
        kernel_package=KERNEL,
        kernel_version=VERSIONS[KERNEL],
        busybox_version=VERSIONS[BUSYBOX_PACKAGE],
        host_tools=host_tool_versions(),
    )
    assert recipe == expected
    assert recipe.key() == expected.key()
    assert recipe_for(make_resolution(python3="3.11.2-1+b2")).key() != recipe.key()


@pytest.mark.parametrize(
    "change",
    [
        {"suite": "trixie"},
        {"sources": (AptSource("http://example.invalid/debian", "bookworm"),)},
    ],
)
def test_the_request_key_names_the_suite_and_sources(change: dict[str, typing.Any]) -> None:
    assert content_key(resolution_request(**change)) != content_key(resolution_request())
    assert resolution_request()["rootfs_packages"] == list(ROOTFS_PACKAGES)


def test_a_recorded_resolution_reads_back_to_the_same_key(tmp_path: Path) -> None:
    assert load_resolution(tmp_path, resolution_request()) is None
    resolution = make_resolution()
    record_resolution(tmp_path, resolution)
    loaded = load_resolution(tmp_path, resolution_request())
    assert loaded == resolution
    assert loaded is not None and recipe_for(loaded).key() == recipe_for(resolution).key()
    assert record_path(tmp_path).read_bytes() == canonical(resolution.as_json())
    newer = make_resolution(python3="3.11.2-1+b2")
    record_resolution(tmp_path, newer)  # a refresh replaces the pointer
    assert load_resolution(tmp_path, resolution_request()) == newer
    assert sorted(p.name for p in record_path(tmp_path).parent.iterdir()) == [
        record_path(tmp_path).name
    ]


def _edit(value: dict[str, typing.Any], change: str) -> bytes:
    if change == "pretty":
        return json.dumps(value, indent=1, sort_keys=True).encode()
    if change == "bad_version":
        value["versions"]["python3"] = "3.11 2"
    elif change == "missing_busybox":
        del value["versions"][BUSYBOX_PACKAGE]
    elif change == "extra_package":
        value["versions"]["curl"] = "7.88.1-10"
    elif change == "request_key":
        value["request_key"] = "0" * 64
    elif change == "request":
        value["request"]["suite"] = "trixie"
    elif change == "kernel_not_a_kernel":
        value["versions"]["busybox"] = value["versions"].pop(KERNEL)
        value["kernel_package"] = "busybox"
    elif change == "unknown_field":
        value["note"] = "x"
    return canonical(value)


@pytest.mark.parametrize(
    "change",
    [
        "pretty",
        "bad_version",
        "missing_busybox",
        "extra_package",
        "request_key",
        "request",
        "kernel_not_a_kernel",
        "unknown_field",
    ],
)
def test_a_tampered_record_is_refused(tmp_path: Path, change: str) -> None:
    record_resolution(tmp_path, make_resolution())
    path = record_path(tmp_path)
    path.write_bytes(_edit(json.loads(path.read_bytes()), change))
    with pytest.raises(ImageError) as err:
        load_resolution(tmp_path, resolution_request())
    assert (err.value.category, err.value.step) == ("cache_corrupt", "resolve")


def test_a_symlinked_record_is_refused(tmp_path: Path) -> None:
    record_resolution(tmp_path / "elsewhere", make_resolution())
    record_path(tmp_path).parent.mkdir(parents=True)
    record_path(tmp_path).symlink_to(record_path(tmp_path / "elsewhere"))
    with pytest.raises(ImageError) as err:
        load_resolution(tmp_path, resolution_request())
    assert err.value.category == "cache_corrupt"


def test_a_warm_cache_is_adopted_with_no_network(tmp_path: Path) -> None:
    resolution = make_resolution()
    record_resolution(tmp_path, resolution)
    entry = fake_entry(tmp_path, recipe_for(resolution))
    assert ensure_offline(tmp_path) == {"key": entry.name, "provenance": "adopted_from_cache"}


def test_no_record_and_no_network_is_fetch_failed(tmp_path: Path) -> None:
    assert ensure_offline(tmp_path) == {"category": "fetch_failed"}
    assert not record_path(tmp_path).exists()


def test_a_record_whose_image_is_gone_asks_the_mirror(tmp_path: Path) -> None:
    record_resolution(tmp_path, make_resolution())
    assert ensure_offline(tmp_path) == {"category": "fetch_failed"}


def test_refresh_asks_the_mirror_even_when_the_entry_is_cached(tmp_path: Path) -> None:
    resolution = make_resolution()
    record_resolution(tmp_path, resolution)
    fake_entry(tmp_path, recipe_for(resolution))
    assert ensure_offline(tmp_path, refresh=True) == {"category": "fetch_failed"}
    assert load_resolution(tmp_path, resolution_request()) == resolution  # left as it was
