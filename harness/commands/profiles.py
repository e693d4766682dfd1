"""`harness profiles list | show NAME [--json]`."""

from __future__ import annotations

import argparse
import json
import sys

from harness.profiles import ProfileError, list_profiles, load_profile
from harness.profiles.sizes import format_size

_SIZE_FIELDS = {
    "guest_ram",
    "qemu_cgroup_limit",
    "host_admission_floor",
    "worker_cgroup_limit",
    "request_admission_floor",
    "runtime_guard",
    "model_working_set",
    "disk",
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("profiles", help="list or show profiles")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="names of the profiles in profiles/")
    show = actions.add_parser("show", help="a profile with every value resolved")
    show.add_argument("name", help="profile name")
    show.add_argument("--json", action="store_true", help="print the profile as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "list":
        for name in list_profiles():
            print(name)
        return 0
    try:
        profile = load_profile(args.name)
    except ProfileError as exc:
        print(f"harness profiles: {exc}", file=sys.stderr)
        return 2
    data = profile.model_dump(mode="json")
    if args.json:
        print(json.dumps(data, sort_keys=True, indent=2))
        return 0
    for section, values in data.items():
        if not isinstance(values, dict):
            print(f"{section} = {values}")
            continue
        print(f"[{section}]")
        for key, value in values.items():
            if key in _SIZE_FIELDS and isinstance(value, int):
                shown = f"{format_size(value)}  ({value:,} bytes)"
            elif isinstance(value, list):
                shown = f"{len(value)} entries"
            else:
                shown = json.dumps(value)
            print(f"  {key:<26} {shown}")
    return 0
