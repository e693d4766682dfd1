"""`harness model synth tiny --out DIR | prepare --profile NAME | verify --profile NAME`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.profiles import ProfileError, load_profile
from harness.profiles.lock import LockError, lock_path, pin_snapshot
from harness.trial.modelstage import ModelStageError, Refusal, check_convertible, prepare
from host.model.categories import PinError
from host.model.pins import format_pins_toml
from host.model.progress import progress_on
from host.model.synth import synthesize_tiny

CACHE = Path.home() / ".cache" / "harness"
SYMLINK_HINT = (
    "harness model: a snapshot is either plain files (hf download --local-dir DIR) or an "
    "HF cache snapshot folder (.../models--ORG--NAME/snapshots/REVISION, whose links point "
    "into ../../blobs); see docs/model-conversion.md"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("model", help="synthesize, prepare or verify a model")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    synth = actions.add_parser("synth", help="write the deterministic tiny checkpoint")
    synth.add_argument("which", choices=("tiny",), help="the checkpoint to synthesize")
    synth.add_argument("--out", type=Path, required=True, help="directory to write it into")
    for name in ("prepare", "verify"):
        action = actions.add_parser(name, help=f"{name} the profile's GGUF in the cache")
        action.add_argument("--profile", required=True, help="profile name")
        if name == "prepare":
            action.add_argument("--source", type=Path, help="a local snapshot (hf_snapshot)")
            action.add_argument(
                "--pin",
                action="store_true",
                help="pin --source in the same pass that converts it (one read of the "
                "weights instead of two), then write profiles/NAME.lock.json",
            )
    pin = actions.add_parser("pin", help="pin a local snapshot: writes profiles/NAME.lock.json")
    pin.add_argument("--profile", required=True, help="profile name")
    pin.add_argument(
        "--source", type=Path, required=True, help="a local snapshot of the model's files"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "synth":
        if args.out.exists() and any(args.out.iterdir()):
            print("harness model: --out must be empty or absent", file=sys.stderr)
            return 2
        args.out.mkdir(parents=True, exist_ok=True)
        print(format_pins_toml(synthesize_tiny(args.out)), end="")
        return 0
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        print(f"harness model: {exc}", file=sys.stderr)
        return 2
    if args.action == "pin":
        try:
            lock = pin_snapshot(
                profile.name, args.source, check=lambda src: check_convertible(profile, src)
            )
        except ModelStageError as exc:
            print(f"harness model: pin refused: {exc.refusal.describe()}", file=sys.stderr)
            return 1
        except PinError as exc:
            print(f"harness model: pin refused: {exc}", file=sys.stderr)  # "category: file"
            if exc.category.startswith("symlink"):
                print(SYMLINK_HINT, file=sys.stderr)
            return 1
        except (LockError, OSError) as exc:
            print(f"harness model: pin refused: {exc}", file=sys.stderr)  # one line
            return 1
        print(f"{lock_path(profile.name)}: {len(lock.pins)} files pinned by the operator")
        return 0
    source = getattr(args, "source", None)
    pinning = getattr(args, "pin", False)
    if pinning and (source is None or profile.model.source != "hf_snapshot"):
        print(
            "harness model: --pin needs --source and a profile whose model is an operator's "
            "snapshot (hf_snapshot)",
            file=sys.stderr,
        )
        return 2
    with progress_on(sys.stderr):  # bars only when stderr is a terminal
        prepared = prepare(profile, CACHE, source, pin=pinning)
    record = prepared.record
    if record.category == "pins_missing":
        print(
            f"harness model: {profile.name} has no pins: run `harness model pin --profile "
            f"{profile.name} --source DIR` on a local snapshot",
            file=sys.stderr,
        )
        return 1
    if record.category != "ok":
        refusal = prepared.refusal or Refusal(record.category)
        print(f"harness model: refused: {refusal.describe()}", file=sys.stderr)
        if record.category == "pin_symlink":
            print(SYMLINK_HINT, file=sys.stderr)
        return 1
    if pinning:
        print(f"pinned      {lock_path(profile.name)}")
    print(f"gguf        {prepared.gguf}")
    print(f"sha256      {record.gguf_sha256}")
    print(f"size        {record.gguf_size_bytes:,} bytes")
    print(f"file type   {record.file_type}")
    print(f"cache key   {record.cache_key}")
    print(f"provenance  {record.provenance}")
    return 0
