"""Build the pinned llama-cpp-python wheel once per flavour, into a content-keyed folder.

Why: llama-cpp-python compiles llama.cpp from its sdist (~7 minutes here), and the
default native build uses AVX-512 and crashes on CPUs without it. We build a portable
wheel once, keyed by the sdist digest, the flavour and the exact CMake arguments, and
install offline from that folder afterwards. One folder per flavour, because pip picks
silently between same-named wheels.

Usage: ``python -m host.wheels build-llama --flavour host|guest [--cache-root DIR]``

Two set-ups at once (two clones on one machine) share the cache: the fill is wrapped in a
per-key lock, so the second waits for the first build and adopts its wheel.

Environment: ``HARNESS_WHEELS_CACHE`` names the cache root (default below).
``HARNESS_WHEELS_TEST_BUILD`` is a test seam, used only by the tests of the cold path:
a command run as ``CMD OUT_DIR FLAVOUR`` in place of the sdist download and the compile,
which must leave exactly one wheel in OUT_DIR. Its command line is part of the content
key, so a stand-in wheel can never be adopted as the real one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from host import cancel
from host.model.keys import content_key
from receipts.staging import fill_lock, staged_directory
from receipts.strictjson import StrictJsonError, loads_strict

Flavour = Literal["host", "guest"]
Provenance = Literal["built_by_this_run", "adopted_from_cache"]
WheelRefusal = Literal[
    "sdist_missing",
    "sdist_ambiguous",
    "sdist_size_mismatch",
    "sdist_digest_mismatch",
    "download_failed",
    "build_failed",
    "wheel_missing",
    "wheel_ambiguous",
    "cache_entry_corrupt",
]

LLAMA_PACKAGE = "llama-cpp-python"
LLAMA_VERSION = "0.3.36"
LLAMA_SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLAMA_SDIST_SIZE = 76_589_250

_PORTABLE = ("-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF")
# The guest runs under TCG, where emulated AVX2 is slower than SSE4.2 (FIELD-NOTES).
_SSE_ONLY = (
    "-DGGML_AVX=OFF",
    "-DGGML_AVX2=OFF",
    "-DGGML_FMA=OFF",
    "-DGGML_F16C=OFF",
    "-DGGML_BMI2=OFF",
)
CMAKE_ARGS: dict[Flavour, tuple[str, ...]] = {
    "host": _PORTABLE,
    "guest": _PORTABLE + _SSE_ONLY,
}
_SIDECAR = "wheel.json"
CACHE_ENV = "HARNESS_WHEELS_CACHE"
TEST_BUILD_ENV = "HARNESS_WHEELS_TEST_BUILD"
PIP_DEADLINE_S = 7200.0
"""A bound on one pip download or build (the build measured ~7-9 min on 2 cores)."""
_CHUNK = 1 << 20


class WheelBuildError(Exception):
    """A refusal of the wheel builder, carrying one closed category."""

    def __init__(self, category: WheelRefusal) -> None:
        super().__init__(category)
        self.category: WheelRefusal = category


@dataclass(frozen=True)
class WheelResult:
    """Where the wheel is, what it hashes to, and whether this run built it."""

    key: str
    directory: Path
    wheel: Path
    sha256: str
    size: int
    provenance: Provenance
    build_seconds: float | None


def default_cache_root() -> Path:
    """``$HARNESS_WHEELS_CACHE`` or ``~/.cache/harness/wheels``: one folder per content key."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    return Path.home() / ".cache" / "harness" / "wheels"


def _test_build_command() -> list[str] | None:
    command = os.environ.get(TEST_BUILD_ENV)
    return shlex.split(command) if command else None


def build_key(flavour: Flavour, stand_in: list[str] | None = None) -> str:
    """Content key of a build: sdist digest, flavour and exact CMake arguments (and the
    test seam's stand-in command when one replaces the real build)."""
    inputs: dict[str, object] = {
        "package": LLAMA_PACKAGE,
        "version": LLAMA_VERSION,
        "sdist_sha256": LLAMA_SDIST_SHA256,
        "flavour": flavour,
        "cmake_args": list(CMAKE_ARGS[flavour]),
    }
    if stand_in is not None:
        inputs["stand_in_build"] = stand_in
    return content_key(inputs)


def sha256_file(path: Path) -> tuple[str, int]:
    """SHA-256 and size of a file, hashed in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            cancel.check()  # a cancelled trial stops within one chunk
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def check_sdist(path: Path) -> None:
    """Refuse an sdist whose size or SHA-256 differs from the pins."""
    digest, size = sha256_file(path)
    if size != LLAMA_SDIST_SIZE:
        raise WheelBuildError("sdist_size_mismatch")
    if digest != LLAMA_SDIST_SHA256:
        raise WheelBuildError("sdist_digest_mismatch")


def _only(paths: list[Path], missing: WheelRefusal, ambiguous: WheelRefusal) -> Path:
    if not paths:
        raise WheelBuildError(missing)
    if len(paths) > 1:
        raise WheelBuildError(ambiguous)
    return paths[0]


def _run_child(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run a child (pip, or the test seam's stand-in) with its stdout sent to our stderr:
    our stdout carries the one JSON result `.ci/llama-wheel` parses, and a shell that
    captures a command's stdout captures its children's too (FIELD-NOTES).
    A trial's cancel (host/cancel.py) kills it: compiling llama.cpp takes minutes, far
    past a scheduler's grace period. Past PIP_DEADLINE_S it is killed too, and reads as
    a failure (-1). It stays in our process group (no new session), so a builder killed
    with its group (test_wheels_cold) takes the child with it; the price: a cancel kills
    pip, not the compiler pip started."""
    proc = subprocess.Popen(argv, env=env, stdout=sys.stderr)
    try:
        cancel.communicate(proc, PIP_DEADLINE_S)
    except subprocess.TimeoutExpired:
        return -1
    return proc.returncode


def _download_sdist(dest: Path) -> Path:
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
    if _run_child([*argv, "-d", str(dest), f"{LLAMA_PACKAGE}=={LLAMA_VERSION}"]) != 0:
        raise WheelBuildError("download_failed")
    return _only(sorted(dest.glob("*.tar.gz")), "sdist_missing", "sdist_ambiguous")


def _build_wheel(sdist: Path, out: Path, flavour: Flavour) -> None:
    env = dict(os.environ)
    env["CMAKE_ARGS"] = " ".join(CMAKE_ARGS[flavour])
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(sdist)]
    if _run_child(argv, env) != 0:
        raise WheelBuildError("build_failed")


def _adopt(key: str, directory: Path) -> WheelResult:
    """Re-hash a cached wheel against the digest recorded when it was built. The sidecar is
    read as strict JSON (`receipts.strictjson`): it decides which wheel is installed into
    the host venv and the guest runtime, so a duplicated `sha256` key or a document that
    is not an object is a corrupt entry, not a crash or a guess."""
    wheel = _only(sorted(directory.glob("*.whl")), "wheel_missing", "wheel_ambiguous")
    try:
        recorded = loads_strict((directory / _SIDECAR).read_bytes())
    except (OSError, StrictJsonError) as exc:
        raise WheelBuildError("cache_entry_corrupt") from exc
    if not isinstance(recorded, dict):
        raise WheelBuildError("cache_entry_corrupt")
    digest, size = sha256_file(wheel)
    if recorded.get("sha256") != digest:
        raise WheelBuildError("cache_entry_corrupt")
    if recorded.get("key") != key or recorded.get("wheel") != wheel.name:
        raise WheelBuildError("cache_entry_corrupt")
    return WheelResult(key, directory, wheel, digest, size, "adopted_from_cache", None)


def _stand_in_build(command: list[str], out: Path, flavour: Flavour) -> None:
    if _run_child([*command, str(out), flavour]) != 0:
        raise WheelBuildError("build_failed")


def build_llama(flavour: Flavour, cache_root: Path | None = None) -> WheelResult:
    """Return the flavour's wheel, building it only when its folder has none.

    The check and the build run under the key's fill lock: a second process asking for
    the same wheel waits (saying so on stderr) and then adopts what the first built."""
    root = cache_root if cache_root is not None else default_cache_root()
    stand_in = _test_build_command()
    key = build_key(flavour, stand_in)
    directory = root / key
    root.mkdir(parents=True, exist_ok=True)
    with fill_lock(directory, f"the {flavour} llama-cpp-python wheel (a build takes minutes)"):
        if directory.is_dir() and any(directory.glob("*.whl")):
            return _adopt(key, directory)
        started = time.monotonic()
        with (
            tempfile.TemporaryDirectory(prefix="harness-sdist-") as tmp,
            staged_directory(directory) as stage,
        ):
            if stand_in is not None:
                _stand_in_build(stand_in, stage, flavour)
            else:
                sdist = _download_sdist(Path(tmp))
                check_sdist(sdist)
                _build_wheel(sdist, stage, flavour)
            wheel = _only(sorted(stage.glob("*.whl")), "wheel_missing", "wheel_ambiguous")
            digest, size = sha256_file(wheel)
            sidecar = {"key": key, "wheel": wheel.name, "sha256": digest, "size": size}
            (stage / _SIDECAR).write_text(json.dumps(sidecar, sort_keys=True) + "\n")
    elapsed = time.monotonic() - started
    final = directory / wheel.name
    return WheelResult(key, directory, final, digest, size, "built_by_this_run", elapsed)


def main(argv: list[str] | None = None) -> int:
    """CLI entry: print the result as one JSON line; refusals exit 1 with a category."""
    parser = argparse.ArgumentParser(prog="python -m host.wheels")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-llama", help="build the pinned llama-cpp-python wheel")
    build.add_argument("--flavour", choices=get_args(Flavour), required=True)
    build.add_argument("--cache-root", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        result = build_llama(args.flavour, args.cache_root)
    except WheelBuildError as exc:
        print(f"build-llama: refused: {exc.category}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "key": result.key,
                "wheel": str(result.wheel),
                "sha256": result.sha256,
                "size": result.size,
                "provenance": result.provenance,
                "build_seconds": result.build_seconds,
            },
            sort_keys=True,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
