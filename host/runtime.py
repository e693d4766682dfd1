"""The guest runtime: our guest code and its pinned wheels, as one verified directory.

The guest has no pip and imports only what the runtime gate verified: this builds, on
the host, `runtime/` = `guest/` + `receipts/` sources + the pinned wheels unpacked
(never byte-compiled: a `__pycache__` would be refused by the gate), and `pins.json`,
its pin table. It is content-keyed (docs/engineering.md §6) over the wheel digests and the
source pin table, staged and renamed (§5), and delivered on a read-only disk.

Wheel versions are the ones installed in the host's environment, which the test
suite exercised; a wheel's bytes are pinned by the SHA-256 recorded in the key. The
wheels are fetched once per set of requirements and kept by content key
(host/wheelset.py), so with the wheel set and the runtime cached the key is computed
and the entry adopted without the network; a missing wheel set that cannot be fetched
is `fetch_failed`.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Literal

from host import cancel
from host.wheelset import WheelSetError, ensure_wheelset
from receipts.canonical import canonical
from receipts.pintable import build_pin_table, pin_table_bytes
from receipts.staging import fill_lock, staged_directory

BUILDER_VERSION = "1"
RUNTIME_SOURCES = ("guest", "receipts")
AGENT_DISTRIBUTIONS = (
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "idna",
    "certifi",
)
WORKER_DISTRIBUTIONS = (
    *AGENT_DISTRIBUTIONS,
    "numpy",
    "llguidance",
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds_py",
    "attrs",
    "starlette",
    "uvicorn",
    "click",
    "structlog",
    "jinja2",
    "markupsafe",
    "diskcache",
)
"""What `guest.worker` imports beyond the agent's needs, for placement `guest`. The
llama-cpp-python wheel is not fetched: it is the guest-flavour build (SSE4.2 only,
host/wheels.py), passed in as an extra wheel."""
DEFAULT_CACHE = Path.home() / ".cache" / "harness" / "runtimes"
Provenance = Literal["built_by_this_run", "adopted_from_cache"]
RuntimeFailure = Literal["fetch_failed", "build_failed", "cache_corrupt"]
"""fetch_failed: wheels (or the guest llama build's sdist) had to come from the network
and could not; build_failed: a wheel could not be built or unpacked; cache_corrupt: a
cached runtime or wheel set no longer matches what was recorded for it."""


class RuntimeBuildError(RuntimeError):
    """The runtime could not be had; `category` says why (closed)."""

    def __init__(self, category: RuntimeFailure) -> None:
        super().__init__(category)
        self.category: RuntimeFailure = category


@dataclass(frozen=True)
class GuestRuntime:
    key: str
    root: Path
    """The directory the gate verifies and puts first on sys.path."""
    pins: Path
    pins_sha256: str
    provenance: Provenance


def _sources_table(repo: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "src"
        _copy_sources(repo, staged)
        return build_pin_table(staged).digest()


def _copy_sources(repo: Path, target: Path) -> None:
    for package in RUNTIME_SOURCES:
        shutil.copytree(
            repo / package, target / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _unpack(wheel: Path, site: Path) -> None:
    """Unpack a wheel as an installer would lay out purelib/platlib (no scripts, no
    byte-compiling); refuse members that would land outside the site directory."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            cancel.check()  # a cancelled trial stops between members
            name = member.filename
            parts = name.split("/")
            if name.startswith("/") or ".." in parts or member.is_dir():
                if member.is_dir():
                    continue
                raise RuntimeBuildError("build_failed")  # an unsafe member
            if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
                parts = parts[2:]
            elif parts[0].endswith(".data"):
                continue  # scripts, headers, data: nothing the guest imports
            target = site.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))


def requirements(distributions: tuple[str, ...]) -> list[str]:
    return [f"{name}=={version(name)}" for name in distributions]


def build_runtime(
    repo: Path,
    distributions: tuple[str, ...] = AGENT_DISTRIBUTIONS,
    extra_wheels: tuple[Path, ...] = (),
    cache: Path = DEFAULT_CACHE,
    wheelsets: Path | None = None,
) -> GuestRuntime:
    """Build (or adopt by content key) the guest runtime for these distributions.

    `wheelsets` is where the fetched wheels are kept (default: beside `cache`)."""
    try:
        fetched = ensure_wheelset(
            requirements(distributions),
            wheelsets if wheelsets is not None else cache.parent / "wheelsets",
        )
    except WheelSetError as exc:
        raise RuntimeBuildError(exc.category) from None
    wheels = [w.path for w in fetched.wheels] + list(extra_wheels)
    digests = {w.path: w.sha256 for w in fetched.wheels}
    declared = {
        "builder": BUILDER_VERSION,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "sources": _sources_table(repo),
        "wheels": [
            {"name": w.name, "sha256": digests.get(w) or _sha256(w)}
            for w in sorted(wheels, key=lambda p: p.name)
        ],
    }
    key = hashlib.sha256(canonical(declared)).hexdigest()
    entry = cache / key
    cache.mkdir(parents=True, exist_ok=True)
    with fill_lock(entry, "the guest runtime"):
        if (entry / "pins.json").is_file():
            return _adopt(key, entry)
        with staged_directory(entry) as staging:
            root = staging / "runtime"
            _copy_sources(repo, root)
            for wheel in wheels:
                _unpack(wheel, root)
            (staging / "pins.json").write_bytes(pin_table_bytes(build_pin_table(root)))
    runtime = _adopt(key, entry)
    return GuestRuntime(
        runtime.key, runtime.root, runtime.pins, runtime.pins_sha256, "built_by_this_run"
    )


def _adopt(key: str, entry: Path) -> GuestRuntime:
    """Use a cached runtime only if its tree still matches its pin table."""
    pins = entry / "pins.json"
    table = build_pin_table(entry / "runtime")
    if pin_table_bytes(table) != pins.read_bytes():
        raise RuntimeBuildError("cache_corrupt")
    return GuestRuntime(key, entry / "runtime", pins, table.digest(), "adopted_from_cache")
