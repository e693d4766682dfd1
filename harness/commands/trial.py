"""`harness trial --profile NAME [--task ID] [--agent model|scripted:FILE] [--placement P] ...`.

Exit status reflects the verdict: 0 accepted, 1 task_incomplete, 3 any failed_* or
evidence_incomplete verdict, 2 usage or an input that cannot be read, 4 when the
receipt the trial wrote does not audit as valid (a harness defect, never hidden).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from harness.dispatch import DispatchRefused, read_ticket, receipts_dir
from harness.profiles import ProfileError, load_profile
from harness.profiles.budgets import profile_contradiction
from harness.trial.pipeline import TrialOptions, run_trial
from harness.trial.progress import LiveProgress
from receipts.canonical import canonical

EXIT_ACCEPTED, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_FAILED, EXIT_INVALID_RECEIPT = 0, 1, 2, 3, 4


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("trial", help="run one trial end to end")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--task", help="default: the profile's default task")
    parser.add_argument("--agent", default="model", help="model | scripted:FILE")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="receipt directory; default: receipts-out, or for --dispatch (whose tree "
        "must stay clean) $XDG_STATE_HOME/harness/receipts (~/.local/state/harness/receipts)",
    )
    parser.add_argument("--backend", choices=("qemu", "libvirt"), default="qemu")
    parser.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    parser.add_argument(
        "--placement",
        choices=("auto", "guest", "host"),
        default=None,
        help="where the worker runs (default: the profile's worker.placement)",
    )
    parser.add_argument("--dispatch", type=Path, metavar="FILE")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        print(f"harness trial: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.placement is not None:
        contradiction = profile_contradiction(profile, args.placement)
        if contradiction is not None:
            print(
                f"harness trial: profile {profile.name} with --placement {args.placement}:"
                f" {contradiction}",
                file=sys.stderr,
            )
            return EXIT_USAGE
    script: Path | None = None
    if args.agent.startswith("scripted:"):
        script = Path(args.agent.removeprefix("scripted:"))
        if not script.is_file():
            print("harness trial: the script file is not readable", file=sys.stderr)
            return EXIT_USAGE
    elif args.agent != "model":
        print("harness trial: --agent must be 'model' or 'scripted:FILE'", file=sys.stderr)
        return EXIT_USAGE
    if args.dispatch is not None:
        try:
            read_ticket(args.dispatch)
        except DispatchRefused as refusal:
            print(f"harness trial: dispatch ticket refused: {refusal.category}", file=sys.stderr)
            return EXIT_USAGE
    options = TrialOptions(
        profile=profile,
        task=args.task or profile.agent.default_task,
        script=script,
        out_dir=args.out or (receipts_dir() if args.dispatch else Path("receipts-out")),
        backend=args.backend,
        accel=args.accel,
        dispatch=args.dispatch,
        placement=args.placement,
    )
    if sys.stderr.isatty() and not args.json:
        with LiveProgress() as live:  # stage, elapsed and deadline, drawn on the terminal
            result = asyncio.run(run_trial(options, progress=live))
    else:
        result = asyncio.run(run_trial(options))
    if args.json:
        sys.stdout.write(
            canonical(
                {
                    "verdict": result.verdict,
                    "receipt": str(result.receipt),
                    "receipt_id": result.bundle.receipt_id,
                    "zip_sha256": result.bundle.zip_sha256,
                    "valid": result.valid,
                }
            ).decode()
            + "\n"
        )
    else:
        print(f"verdict     {result.verdict}")
        print(f"receipt     {result.receipt}")
        print(f"receipt id  {result.bundle.receipt_id}")
        print(f"zip sha256  {result.bundle.zip_sha256}")
    if not result.valid:
        return EXIT_INVALID_RECEIPT
    if result.verdict == "accepted":
        return EXIT_ACCEPTED
    return EXIT_INCOMPLETE if result.verdict == "task_incomplete" else EXIT_FAILED
