"""`harness image build [--json] | show`: the content-keyed guest image."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from host.image.build import ensure_image, failure_record
from host.image.errors import ImageError
from host.image.show import list_entries
from receipts.canonical import canonical

IMAGES = Path.home() / ".cache" / "harness" / "images"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("image", help="build or show the guest image")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build (or adopt by its key) the guest image")
    build.add_argument("--json", action="store_true", help="print the image record as JSON")
    actions.add_parser("show", help="every cached image: key, state, sizes")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        for entry in list_entries(IMAGES):
            files = entry.manifest.files if entry.manifest is not None else {}
            sizes = "  ".join(f"{name} {digest.size:,} B" for name, digest in sorted(files.items()))
            print(f"{entry.key}  {entry.state:<8} {sizes}")
        return 0
    try:
        image = ensure_image(IMAGES)
    except ImageError as exc:
        record = failure_record(exc, 0)
        print(f"harness image: refused: {record.category}", file=sys.stderr)
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
