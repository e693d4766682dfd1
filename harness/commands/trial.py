"""`harness trial --profile NAME [--task ID] [--agent AGENT] [--placement P] ...`.

Exit status reflects the verdict: 0 accepted, 1 task_incomplete, 3 any failed_* or
evidence_incomplete verdict, 5 accepted_unguarded (a pass judged in the solution's own
process: not 0, so CI never counts it as a guarded pass), 2 usage or an input that
cannot be read, 4 when the receipt the trial wrote does not audit as valid (a harness
defect, never hidden).
A trial stopped by SIGINT or SIGTERM exits 130 or 143 (128 + the signal's number,
the shell's convention, which Slurm, GitHub Actions and systemd read as "stopped").

Why handlers are installed here, explicitly: Python's default SIGTERM action kills
the process with no `finally`, so no teardown and no receipt; and a background job
of a non-interactive shell starts with SIGINT ignored (FIELD-NOTES.md). The first
signal cancels the running stage (Trial.cancel): teardown releases everything with
cleanup receipts and a receipt with verdict `cancelled` is written. A second signal,
or HURRY_AFTER_S after the first, means hurry: release and write only.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
from pathlib import Path
from typing import get_args

import structlog

from harness.dispatch import DispatchRefused, SuiteMembership, read_ticket, receipts_dir
from harness.profiles import ProfileError, load_profile
from harness.profiles.model import profile_contradiction
from harness.receiptsign import add_sign_key_argument, sign_trial_receipt
from harness.remedies import describe, fix_command
from harness.trial.context import TrialOptions
from harness.trial.gueststart import GuestStartRequest
from harness.trial.pipeline import Trial, TrialResult
from harness.trial.progress import LiveProgress, LogProgress, ProgressSink
from receipts.audit import audit_and_read_file
from receipts.canonical import canonical
from receipts.failure import FailureReason, failure_reason
from receipts.records.agent import AgentName
from receipts.records.trial import CancelSignal, Verdict
from receipts.signing import KeyRefused, fingerprint, read_signer
from receipts.vocabulary import AccelRequest, Backend, PlacementRequest

EXIT_ACCEPTED, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_FAILED, EXIT_INVALID_RECEIPT = 0, 1, 2, 3, 4
EXIT_UNGUARDED = 5
STOP_SIGNALS: dict[CancelSignal, signal.Signals] = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
}
EXIT_STOPPED: dict[CancelSignal, int] = {name: 128 + sig for name, sig in STOP_SIGNALS.items()}
"""130 for SIGINT, 143 for SIGTERM."""
HURRY_AFTER_S = 20.0
"""After the first stop signal, hurry on our own: Slurm's KillWait (30 s by default) is
the whole grace period, and GitHub Actions kills 10 s after its SIGINT."""

REPEAT_S = 1.0
"""The same signal again within this is the same signal. Why: a signal sent to the whole
process group (a terminal's Ctrl-C) can reach a child forked at that moment before it
leaves our group (QEMU, the worker); the child still shares our event loop's wakeup
pipe, so the loop sees the one signal twice, which would read as 'hurry'."""

EPILOG = """\
exit status: 0 accepted, 1 task_incomplete, 3 any other verdict (failed_*,
evidence_incomplete), 5 accepted_unguarded (the hidden tests passed in the solution's
own process, where it could have written the pass), 2 usage, 4 the receipt written
does not audit as valid.
SIGINT or SIGTERM cancels the trial: every owned resource is released, a valid
receipt with verdict `cancelled` (naming the stage) is written, and the exit
status is 130 (SIGINT) or 143 (SIGTERM), within Slurm's 30 s KillWait. A second
signal hurries: release and write only (host state recorded unread)."""


async def run_trial_with_signals(
    options: TrialOptions, progress: ProgressSink | None = None
) -> tuple[TrialResult, CancelSignal | None]:
    """Run the trial with SIGINT and SIGTERM handled (see the module's docstring); the
    result and the first stop signal received, if any."""
    trial = Trial(options, progress=progress)
    loop = asyncio.get_running_loop()
    hurry_timer: asyncio.TimerHandle | None = None

    last: dict[CancelSignal, float] = {}

    def on_signal(name: CancelSignal) -> None:
        nonlocal hurry_timer
        now = loop.time()
        if now - last.get(name, -REPEAT_S) < REPEAT_S:
            return  # the same signal twice at once: one signal (see REPEAT_S)
        last[name] = now
        structlog.get_logger("harness.trial").warning(
            "stop_signal", category=name, stage=trial.current
        )
        trial.cancel(name)
        if hurry_timer is None:
            hurry_timer = loop.call_later(HURRY_AFTER_S, trial.hasten)

    for name, signum in STOP_SIGNALS.items():
        loop.add_signal_handler(signum, on_signal, name)
    try:
        result = await trial.run()
    finally:
        for signum in STOP_SIGNALS.values():
            loop.remove_signal_handler(signum)
        if hurry_timer is not None:
            hurry_timer.cancel()
    return result, trial.stop_signal


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "trial",
        help="run one trial end to end",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--profile", required=True, help="profile name (harness profiles list)")
    parser.add_argument("--task", help="default: the profile's default task")
    parser.add_argument(
        "--agent",
        default="model",
        help="model | scripted:FILE (the harness's own loop) | opencode | opencode+scripted:FILE "
        "(the pinned OpenCode CLI, driven by the model or by the script)",
    )
    add_sign_key_argument(parser, "the receipt")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="receipt directory; default: receipts-out, or for --dispatch (whose tree "
        "must stay clean) $XDG_STATE_HOME/harness/receipts (~/.local/state/harness/receipts)",
    )
    parser.add_argument(
        "--backend", choices=get_args(Backend), default="qemu", help="how the VM is run"
    )
    parser.add_argument(
        "--accel",
        choices=get_args(AccelRequest),
        default="auto",
        help="accelerator; auto boots a probe guest under KVM and falls back to TCG",
    )
    parser.add_argument(
        "--placement",
        choices=get_args(PlacementRequest),
        default=None,
        help="where the worker runs (default: the profile's worker.placement)",
    )
    parser.add_argument(
        "--guest-start",
        choices=get_args(GuestStartRequest),
        default="snapshot",
        help="restore guests from a snapshot of the image where possible (made once per "
        "image and guest shape, verified before every use), or always boot cold",
    )
    parser.add_argument(
        "--dispatch", type=Path, metavar="FILE", help="a one-shot ticket (harness dispatch issue)"
    )
    parser.add_argument(
        "--suite-member",
        metavar="SUITE_ID/MEMBER",
        default=None,
        help="with a suite ticket as --dispatch: the suite run and member this trial is "
        "(harness suite run --dispatch passes it)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the result as one canonical JSON line"
    )
    parser.set_defaults(run=run)


def _failure(receipt: Path) -> FailureReason | None:
    """Why the trial failed, read back from the receipt it wrote (never from memory)."""
    try:
        _result, records = audit_and_read_file(receipt)
    except OSError:
        return None
    return failure_reason(records) if records is not None else None


def _membership(value: str | None) -> SuiteMembership | None:
    """`SUITE_ID/MEMBER` (32 hex digits, 4-6 digits); None when absent or malformed."""
    if value is None:
        return None
    suite_id, _, member_id = value.partition("/")
    if re.fullmatch(r"[0-9a-f]{32}", suite_id) and re.fullmatch(r"[0-9]{4,6}", member_id):
        return SuiteMembership(suite_id=suite_id, member_id=member_id)
    return None


def parse_agent(spec: str) -> tuple[AgentName, Path | None]:
    """`--agent`: whose code is the agent, and the script that drives it (None: the model).
    ValueError with a one-line message for anything else, or a script that is not a file."""
    name: AgentName = "harness_loop"
    driver = spec
    if spec == "opencode":
        name, driver = "opencode", "model"
    elif spec.startswith("opencode+"):
        name, driver = "opencode", spec.removeprefix("opencode+")
    if driver == "model":
        return name, None
    if driver.startswith("scripted:"):
        script = Path(driver.removeprefix("scripted:"))
        if not script.is_file():
            raise ValueError("the script file is not readable")
        return name, script
    raise ValueError(
        "--agent must be 'model', 'scripted:FILE', 'opencode' or 'opencode+scripted:FILE'"
    )


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
    try:
        agent, script = parse_agent(args.agent)
    except ValueError as exc:
        print(f"harness trial: {exc}", file=sys.stderr)
        return EXIT_USAGE
    signer = None
    if args.sign_key is not None:
        try:  # before the trial: a key that cannot sign is a usage error, not a late one
            signer = read_signer(Path(args.sign_key))
        except KeyRefused as exc:
            print(f"harness trial: the signing key is refused: {exc.category}", file=sys.stderr)
            return EXIT_USAGE
    if args.dispatch is not None:
        try:
            read_ticket(args.dispatch)
        except DispatchRefused as refusal:
            print(f"harness trial: dispatch ticket refused: {refusal.category}", file=sys.stderr)
            return EXIT_USAGE
    membership = _membership(args.suite_member)
    if args.suite_member is not None and (membership is None or args.dispatch is None):
        print("harness trial: --suite-member is SUITE_ID/MEMBER, with --dispatch", file=sys.stderr)
        return EXIT_USAGE
    options = TrialOptions(
        profile=profile,
        task=args.task or profile.agent.default_task,
        script=script,
        out_dir=args.out or (receipts_dir() if args.dispatch else Path("receipts-out")),
        backend=args.backend,
        accel=args.accel,
        dispatch=args.dispatch,
        suite_member=membership,
        placement=args.placement,
        guest_start=args.guest_start,
        agent=agent,
    )
    if sys.stderr.isatty() and not args.json:
        with LiveProgress() as live:  # stage, elapsed and deadline, drawn on the terminal
            result, stopped = asyncio.run(run_trial_with_signals(options, progress=live))
    else:
        result, stopped = asyncio.run(run_trial_with_signals(options, progress=LogProgress()))
    reason = _failure(result.receipt)
    remedy = reason.remedy if reason is not None else None
    envelope = (
        sign_trial_receipt(result.receipt, signer) if signer is not None and result.valid else None
    )
    if args.json:
        sys.stdout.write(
            canonical(
                {
                    "verdict": result.verdict,
                    "receipt": str(result.receipt),
                    "receipt_id": result.bundle.receipt_id,
                    "zip_sha256": result.bundle.zip_sha256,
                    "valid": result.valid,
                    "failed_stage": reason.stage if reason is not None else None,
                    "failed_category": reason.category if reason is not None else None,
                    "remedy": remedy,
                    "fix": fix_command(remedy, profile.name) if remedy is not None else None,
                    "signature": str(envelope) if envelope is not None else None,
                    "signed_by": fingerprint(signer.public_key) if envelope and signer else None,
                }
            ).decode()
            + "\n"
        )
    else:
        print(f"verdict     {result.verdict}")
        for label, text in describe(reason, profile.name):
            print(f"{label:<11} {text}")
        print(f"receipt     {result.receipt}")
        print(f"receipt id  {result.bundle.receipt_id}")
        print(f"zip sha256  {result.bundle.zip_sha256}")
        if envelope is not None and signer is not None:
            print(f"signature   {envelope}")
            print(f"signed by   {fingerprint(signer.public_key)}")
    if not result.valid:
        return EXIT_INVALID_RECEIPT
    if stopped is not None:
        return EXIT_STOPPED[stopped]
    return verdict_exit_status(result.verdict)


def verdict_exit_status(verdict: Verdict) -> int:
    """0 only for a guarded pass: `accepted_unguarded` has its own status (5)."""
    return {
        "accepted": EXIT_ACCEPTED,
        "accepted_unguarded": EXIT_UNGUARDED,
        "task_incomplete": EXIT_INCOMPLETE,
    }.get(verdict, EXIT_FAILED)
