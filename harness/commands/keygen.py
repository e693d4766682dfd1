"""`harness keygen --out PREFIX [--force]`: an Ed25519 key pair for signing receipts.

Writes PREFIX.key (PKCS#8 PEM, mode 0600: `harness trial --sign-key` refuses a key
others can read) and PREFIX.pub (the public key a reviewer gives `harness audit --key`),
and prints the key's fingerprint, the `signed_by` an audit with that key reports.
Exit 0 written, 2 usage (a file already there without --force, an unwritable place).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from receipts.signing import generate_key

EXIT_WRITTEN, EXIT_USAGE = 0, 2


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("keygen", help="make an Ed25519 key pair for signed receipts")
    parser.add_argument(
        "--out", required=True, type=Path, metavar="PREFIX", help="writes PREFIX.key, PREFIX.pub"
    )
    parser.add_argument("--force", action="store_true", help="replace existing files")
    parser.set_defaults(run=run)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write through a new file in the same directory, then rename over `path`: a
    reader never sees half a key, and the private key is never readable by others."""
    staging = path.with_name(f".{path.name}.partial")
    staging.unlink(missing_ok=True)
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)


def run(args: argparse.Namespace) -> int:
    prefix: Path = args.out
    private, public = prefix.with_name(prefix.name + ".key"), prefix.with_name(prefix.name + ".pub")
    pair = generate_key()
    try:
        for path in (private, public):
            if path.exists() and not args.force:
                print(f"harness keygen: {path} exists (--force replaces it)", file=sys.stderr)
                return EXIT_USAGE
        _write(private, pair.private_pem, 0o600)
        _write(public, pair.public_pem, 0o644)
    except OSError as exc:
        print(f"harness keygen: cannot write the key ({type(exc).__name__})", file=sys.stderr)
        return EXIT_USAGE
    print(f"private key  {private}")
    print(f"public key   {public}")
    print(f"fingerprint  {pair.fingerprint}")
    return EXIT_WRITTEN
