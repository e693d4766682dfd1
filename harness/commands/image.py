"""`harness image build [--refresh] [--json] | show`: the content-keyed guest image.

`build` fills what a trial's image and VM stages take from the network, so that later
trials run without it (`make setup` runs it): the image (its apt resolution recorded,
host/image/resolution.py), the agent's guest runtime and the worker's wheel set
(host/runtime.py, host/wheelset.py). Run again with everything cached, it adopts each
and needs no network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.trial.diskfiles import REPO
from host.image.build import ensure_image, failure_record
from host.image.errors import ImageError
from host.image.show import list_entries
from host.runtime import WORKER_DISTRIBUTIONS, RuntimeBuildError, build_runtime, requirements
from host.wheelset import WheelSetError, ensure_wheelset
from receipts.canonical import canonical

CACHE = Path.home() / ".cache" / "harness"
IMAGES = CACHE / "images"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("image", help="build or show the guest image")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser(
        "build",
        help="build (or adopt by its key) the guest image and the guest runtime; the first "
        "time needs the network (mmdebstrap: about a minute), later runs adopt offline",
    )
    build.add_argument(
        "--refresh",
        action="store_true",
        help="ask the Debian mirror for today's versions again (security updates) "
        "instead of the recorded resolution",
    )
    build.add_argument("--json", action="store_true", help="the image record as canonical JSON")
    actions.add_parser("show", help="every cached image: key, state, sizes")
    parser.set_defaults(run=run)


def _runtime(cache: Path) -> str | None:
    """Fill the agent's runtime and the worker's wheel set; a refusal's message or None."""
    try:
        build_runtime(REPO, cache=cache / "runtimes", wheelsets=cache / "wheelsets")
        ensure_wheelset(requirements(WORKER_DISTRIBUTIONS), cache / "wheelsets")
    except (RuntimeBuildError, WheelSetError) as exc:
        return f"guest runtime refused: {exc.category}"
    return None


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        for entry in list_entries(IMAGES):
            files = entry.manifest.files if entry.manifest is not None else {}
            sizes = "  ".join(f"{name} {digest.size:,} B" for name, digest in sorted(files.items()))
            print(f"{entry.key}  {entry.state:<8} {sizes}")
        return 0
    try:
        image = ensure_image(IMAGES, refresh=args.refresh)
    except ImageError as exc:
        record = failure_record(exc, 0)
        print(f"harness image: refused: {record.category}", file=sys.stderr)
        if record.category == "fetch_failed":
            print("harness image: the Debian mirror could not be reached", file=sys.stderr)
        return 1
    refusal = _runtime(CACHE)
    if refusal is not None:
        print(f"harness image: {refusal}", file=sys.stderr)
        return 1
    record = image.to_record()
    if args.json:
        sys.stdout.write(canonical(record.to_json()).decode() + "\n")
    else:
        print(f"key         {record.image_key}")
        print(f"provenance  {record.provenance}")
        print(f"kernel      {record.kernel_package}")
        print(f"base        {record.base_size_bytes:,} bytes")
        print(f"build       {record.build_ms:,} ms")
    return 0
