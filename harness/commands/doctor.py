"""`harness doctor [--json]`: exit 0 when every required prerequisite is there.

KVM is optional: it is reported `present`, `usable` or `unusable` from the same probe
boot a trial uses (host/doctor.py), never `ok` because /dev/kvm exists."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from host.doctor import run_checks
from receipts.canonical import canonical

CACHE = Path.home() / ".cache" / "harness"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("doctor", help="check this host's prerequisites")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    checks = run_checks(CACHE)
    if args.json:
        payload = [
            {"name": c.name, "state": c.state, "required": c.required, "fix": c.fix} for c in checks
        ]
        sys.stdout.write(canonical(payload).decode() + "\n")
    else:
        for check in checks:
            need = "required" if check.required else "optional"
            line = f"{check.name:<18} {check.state:<13} {need:<9}"
            fine = check.state in ("ok", "usable")
            print(line + ("" if fine else f"  fix: {check.fix}"))
    return 0 if all(c.state == "ok" for c in checks if c.required) else 1
