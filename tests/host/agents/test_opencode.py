"""The pinned agent CLI's cache entry: fetched over real HTTP from a loopback registry,
checked against its pins, adopted offline, and refused when it differs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from host.agents.opencode import PIN, CliUnavailable, ensure_opencode, entry_name
from tests.host.agents.registry import pin_for, serving, tarball

EXE = b"\x7fELF pretend executable\n" * 100
MEMBER = "package/bin/opencode"
PACKAGE = "opencode-linux-x64"
URL = f"/{PACKAGE}/-/{PACKAGE}-1.0.0.tgz"


def _registry(monkeypatch: pytest.MonkeyPatch, base: str) -> None:
    monkeypatch.setenv("npm_config_registry", base)


def test_fills_once_then_adopts_without_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tgz = tarball({"package/package.json": b"{}", MEMBER: EXE})
    pin = pin_for(PACKAGE, tgz, MEMBER, EXE)
    with serving({URL: tgz}) as base:
        _registry(monkeypatch, base)
        filled = ensure_opencode(tmp_path, pin)
    assert filled.path.read_bytes() == EXE
    assert (filled.sha256, filled.size, filled.version) == (pin.sha256, pin.size, "1.0.0")
    assert sorted(p.name for p in filled.path.parent.iterdir()) == ["opencode"]
    _registry(monkeypatch, "http://127.0.0.1:9")  # nothing listens: adoption is offline
    assert ensure_opencode(tmp_path, pin).path == filled.path


@pytest.mark.parametrize(
    ("case", "category"),
    [
        ("tarball_bytes", "integrity_mismatch"),
        ("tarball_longer", "integrity_mismatch"),
        ("member_missing", "integrity_mismatch"),
        ("member_bytes", "integrity_mismatch"),
        ("not_served", "fetch_failed"),
    ],
)
def test_a_fetch_that_is_not_the_pin_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, category: str
) -> None:
    tgz = tarball({MEMBER: EXE})
    pin = pin_for(PACKAGE, tgz, MEMBER, EXE)
    served = {URL: tgz}
    if case == "tarball_bytes":
        served[URL] = tgz[:-1] + bytes([tgz[-1] ^ 1])
    elif case == "tarball_longer":
        served[URL] = tgz + b"\0"
    elif case == "member_missing":
        other = tarball({"package/bin/other": EXE})
        pin = pin_for(PACKAGE, other, MEMBER, EXE)  # the tarball is the pinned one
        served[URL] = other
    elif case == "member_bytes":
        pin = dataclasses.replace(pin, sha256="0" * 64)  # the member is not the pinned one
    elif case == "not_served":
        served = {}
    with serving(served) as base:
        _registry(monkeypatch, base)
        with pytest.raises(CliUnavailable) as raised:
            ensure_opencode(tmp_path, pin)
    assert raised.value.category == category
    assert not (tmp_path / entry_name(pin)).exists()


@pytest.mark.parametrize("damage", ["flipped_byte", "extra_file", "symlink"])
def test_a_damaged_entry_is_refused_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    tgz = tarball({MEMBER: EXE})
    pin = pin_for(PACKAGE, tgz, MEMBER, EXE)
    with serving({URL: tgz}) as base:
        _registry(monkeypatch, base)
        path = ensure_opencode(tmp_path, pin).path
    path.chmod(0o755)
    if damage == "flipped_byte":
        data = bytearray(path.read_bytes())
        data[3] ^= 1
        path.write_bytes(bytes(data))
    elif damage == "extra_file":
        (path.parent / "note").write_text("x")
    else:
        path.rename(path.parent / "real")
        path.symlink_to(path.parent / "real")
        (path.parent / "real").rename(tmp_path / "real")
        path.unlink()
        path.symlink_to(tmp_path / "real")
    with pytest.raises(CliUnavailable) as raised:
        ensure_opencode(tmp_path, pin)
    assert raised.value.category == "cache_corrupt"


def test_the_pin_names_the_registry_tarball_of_the_measured_release() -> None:
    assert PIN.url("https://registry.npmjs.org") == (
        "https://registry.npmjs.org/opencode-linux-x64/-/opencode-linux-x64-1.18.33.tgz"
    )
    assert PIN.member == MEMBER
