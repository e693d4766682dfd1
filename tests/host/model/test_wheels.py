"""The llama-cpp-python wheel builder: keys, sdist pins and cached-wheel adoption.

The build itself (pip download + ~10 minutes of compiling) is not run here; the
parity tests run against the wheel it produced.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from host.wheels import (
    CMAKE_ARGS,
    LLAMA_SDIST_SHA256,
    LLAMA_SDIST_SIZE,
    WheelBuildError,
    _build_wheel,
    _download_sdist,
    _only,
    build_key,
    build_llama,
    check_sdist,
)

WHEEL = "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"


def test_key_is_canonical_json_of_declared_inputs() -> None:
    inputs = {
        "package": "llama-cpp-python",
        "version": "0.3.36",
        "sdist_sha256": LLAMA_SDIST_SHA256,
        "flavour": "host",
        "cmake_args": ["-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF"],
    }
    text = json.dumps(inputs, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert build_key("host") == hashlib.sha256(text.encode()).hexdigest()
    assert build_key("guest") != build_key("host")


def test_guest_flavour_is_sse_only() -> None:
    assert CMAKE_ARGS["guest"][:2] == CMAKE_ARGS["host"]
    for flag in ("AVX", "AVX2", "FMA", "F16C", "BMI2"):
        assert f"-DGGML_{flag}=OFF" in CMAKE_ARGS["guest"]
        assert f"-DGGML_{flag}=OFF" not in CMAKE_ARGS["host"]


def test_sdist_of_wrong_size_refused(tmp_path: Path) -> None:
    path = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    path.write_bytes(b"not the sdist")
    with pytest.raises(WheelBuildError) as info:
        check_sdist(path)
    assert info.value.category == "sdist_size_mismatch"


def test_sdist_of_right_size_wrong_bytes_refused(tmp_path: Path) -> None:
    path = tmp_path / "llama_cpp_python-0.3.36.tar.gz"
    with path.open("wb") as handle:
        handle.truncate(LLAMA_SDIST_SIZE)  # sparse: right size, all zeros
    with pytest.raises(WheelBuildError) as info:
        check_sdist(path)
    assert info.value.category == "sdist_digest_mismatch"


def _entry(root: Path, content: bytes = b"PK fake wheel") -> Path:
    key = build_key("host")
    directory = root / key
    directory.mkdir(parents=True)
    (directory / WHEEL).write_bytes(content)
    sidecar = {
        "key": key,
        "wheel": WHEEL,
        "sha256": hashlib.sha256(content).hexdigest(),
        "size": len(content),
    }
    (directory / "wheel.json").write_text(json.dumps(sidecar))
    return directory


def test_existing_wheel_is_adopted_without_building(tmp_path: Path) -> None:
    directory = _entry(tmp_path)
    result = build_llama("host", tmp_path)
    assert result.provenance == "adopted_from_cache"
    assert result.wheel == directory / WHEEL
    assert result.sha256 == hashlib.sha256(b"PK fake wheel").hexdigest()
    assert result.build_seconds is None


def test_corrupted_cached_wheel_refused(tmp_path: Path) -> None:
    directory = _entry(tmp_path)
    (directory / WHEEL).write_bytes(b"PK fake wheeL")
    with pytest.raises(WheelBuildError) as info:
        build_llama("host", tmp_path)
    assert info.value.category == "cache_entry_corrupt"


def test_sidecar_missing_or_for_other_key_refused(tmp_path: Path) -> None:
    directory = _entry(tmp_path)
    sidecar = json.loads((directory / "wheel.json").read_text())
    (directory / "wheel.json").write_text(json.dumps({**sidecar, "key": "0" * 64}))
    with pytest.raises(WheelBuildError) as info:
        build_llama("host", tmp_path)
    assert info.value.category == "cache_entry_corrupt"
    (directory / "wheel.json").write_text(json.dumps({**sidecar, "wheel": "other.whl"}))
    with pytest.raises(WheelBuildError) as info:
        build_llama("host", tmp_path)
    assert info.value.category == "cache_entry_corrupt"
    (directory / "wheel.json").unlink()
    with pytest.raises(WheelBuildError) as info:
        build_llama("host", tmp_path)
    assert info.value.category == "cache_entry_corrupt"


def test_two_wheels_in_one_folder_refused(tmp_path: Path) -> None:
    directory = _entry(tmp_path)
    (directory / WHEEL.replace("0.3.36", "0.3.35")).write_bytes(b"other")
    with pytest.raises(WheelBuildError) as info:
        build_llama("host", tmp_path)
    assert info.value.category == "wheel_ambiguous"


@pytest.fixture
def offline_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Configure the real pip to have no index and no local wheels: it must fail."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))


@pytest.mark.usefixtures("offline_pip")
def test_failed_download_is_a_category(tmp_path: Path) -> None:
    with pytest.raises(WheelBuildError) as info:
        _download_sdist(tmp_path / "dl")
    assert info.value.category == "download_failed"


@pytest.mark.usefixtures("offline_pip")
def test_failed_build_is_a_category(tmp_path: Path) -> None:
    package = tmp_path / "broken-0.0.0"
    package.mkdir()
    (package / "pyproject.toml").write_text("[build-system]\nrequires = ['setuptools']\n")
    sdist = tmp_path / "broken-0.0.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(package, arcname=package.name)
    with pytest.raises(WheelBuildError) as info:
        _build_wheel(sdist, tmp_path / "out", "host")
    assert info.value.category == "build_failed"


def test_exactly_one_artifact() -> None:
    with pytest.raises(WheelBuildError) as info:
        _only([], "wheel_missing", "wheel_ambiguous")
    assert info.value.category == "wheel_missing"
    assert _only([Path("a.whl")], "wheel_missing", "wheel_ambiguous") == Path("a.whl")


def _sidecar_text(directory: Path) -> str:
    return (directory / "wheel.json").read_text()


@pytest.mark.parametrize(
    "damage",
    ["duplicate_sha256", "nan_size", "not_an_object"],
)
def test_sidecar_that_is_not_strict_json_refused(tmp_path: Path, damage: str) -> None:
    """The sidecar decides which wheel is installed. `json.loads` would adopt the first two
    (the last duplicate wins, NaN is a float) and crash on the third (`[].get`). Mutation
    control: read it with `json.loads` and this test fails for all three."""
    directory = _entry(tmp_path)
    text = _sidecar_text(directory)
    right = hashlib.sha256(b"PK fake wheel").hexdigest()
    if damage == "duplicate_sha256":
        text = text.replace('{"key"', '{"sha256": "' + "0" * 64 + '", "key"', 1)
        assert text.count(right) == 1 and text.count('"sha256"') == 2
    elif damage == "nan_size":
        text = text.replace('"size": 13', '"size": NaN')
        assert "NaN" in text
    else:
        text = "[" + text + "]"
    (directory / "wheel.json").write_text(text)
    with pytest.raises(WheelBuildError) as info:
        build_llama("host", tmp_path)
    assert info.value.category == "cache_entry_corrupt"
