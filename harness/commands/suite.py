"""`harness suite run SUITE [--executor local|slurm] [--out DIR] [--cpus N] [--json]`
and `harness suite report SUITE.zip`.

run: SUITE is a file, or a name in profiles/suites/. Exit 0 when the suite receipt was
written and audits valid (whatever the members' verdicts), 4 when it does not audit,
2 for a suite that cannot be run, 130/143 when SIGINT/SIGTERM stopped it (every running
member is stopped with SIGTERM and writes its `cancelled` receipt; members not started
are recorded as cancelled before start; the suite receipt is still written).
report: the audited suite's figures as one JSON document (HTML: `harness view`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.live import Live
from rich.table import Table

from harness.dispatch import (
    DispatchRefused,
    consume_for_suite,
    inside,
    ledger_dir,
    read_ticket,
    receipts_dir,
)
from harness.receiptsign import add_sign_key_argument, sign_suite_receipt
from harness.source import bind_source
from harness.suite.executor import Executor
from harness.suite.ledger import Capacity, Ledger
from harness.suite.local import LocalExecutor
from harness.suite.report import suite_report
from harness.suite.run import SuiteRun, SuiteTicket
from harness.suite.spec import Suite, SuiteError, load_suite
from harness.trial.diskfiles import REPO
from receipts.audit.suite import audit_suite_and_read, audit_suite_bytes, read_suite_file
from receipts.canonical import canonical
from receipts.signing import KeyRefused, fingerprint, read_signer

EXIT_OK, EXIT_USAGE, EXIT_INVALID = 0, 2, 4
SUITES_DIR = REPO / "profiles" / "suites"
TASKS_DIR = REPO / "profiles" / "tasks"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("suite", help="run many trials and bind their receipts")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run_p = actions.add_parser("run", help="run a suite (profiles/suites/NAME.toml or a file)")
    run_p.add_argument("suite", help="suite name or path")
    run_p.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="local: this host, bounded by the host-level ledger; slurm: one job per member",
    )
    run_p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the suite receipt goes (default: receipts-out)",
    )
    run_p.add_argument(
        "--cpus",
        type=int,
        default=None,
        help="CPUs the host-level ledger may reserve (default: the core count; "
        "more overcommits the cores)",
    )
    run_p.add_argument(
        "--dispatch",
        type=Path,
        metavar="FILE",
        help="a suite ticket (harness dispatch issue --suite): consumed once by this run, "
        "named by every member's receipt; needs a clean checkout and --out outside it "
        "(default then: $XDG_STATE_HOME/harness/receipts)",
    )
    add_sign_key_argument(run_p, "the suite receipt (and so every member digest)")
    run_p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    report_p = actions.add_parser("report", help="figures of a suite receipt, as JSON")
    report_p.add_argument(
        "receipt", type=Path, metavar="SUITE.zip", help="the suite receipt (audited first)"
    )
    parser.set_defaults(run=run)


def suite_path(name: str) -> Path:
    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        return path
    return SUITES_DIR / f"{name}.toml"


class ProgressTable:
    """Each member's state and elapsed time, for a terminal (rich) or a log."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.state = {m.member_id: "queued" for m in suite.members}
        self.since: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.started = time.monotonic()

    def update(self, member_id: str, state: str) -> None:
        self.state[member_id] = state
        if state == "running":
            self.since[member_id] = time.monotonic()
        elif member_id in self.since and state not in ("queued", "running"):
            self.ended[member_id] = time.monotonic()

    def table(self) -> Table:
        now = time.monotonic()
        counts: dict[str, int] = {}
        for state in self.state.values():
            counts[state] = counts.get(state, 0) + 1
        summary = "  ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        table = Table(
            title=f"suite {self.suite.file.name}: {summary}  ({now - self.started:.0f} s)"
        )
        for column in ("member", "task", "profile", "agent", "state", "elapsed"):
            table.add_column(column)
        shown = [m for m in self.suite.members if self.state[m.member_id] == "running"]
        shown += [m for m in self.suite.members if self.state[m.member_id] != "running"]
        for member in shown[:40]:
            start = self.since.get(member.member_id)
            end = self.ended.get(member.member_id, now)
            elapsed = f"{end - start:.0f} s" if start is not None else "-"
            agent = "model" if member.script is None else f"scripted:{member.script.stem}"
            table.add_row(
                member.member_id,
                member.task,
                member.profile.name,
                agent,
                self.state[member.member_id],
                elapsed,
            )
        return table


def _executor(name: str, cpus: int | None) -> Executor:
    if name == "local":
        return LocalExecutor(Ledger(capacity=Capacity.of_host(cpus)))
    from harness.suite import slurm

    return slurm.SlurmExecutor()


async def _run_suite(run_: SuiteRun, progress: ProgressTable) -> tuple[Path, str | None]:
    cancel = asyncio.Event()
    loop = asyncio.get_running_loop()
    stopped: list[str] = []

    def on_signal(name: str) -> None:
        if not stopped:
            stopped.append(name)
        cancel.set()

    for name, signum in (("SIGINT", signal.SIGINT), ("SIGTERM", signal.SIGTERM)):
        loop.add_signal_handler(signum, on_signal, name)
    try:
        target, _written = await run_.run(cancel, progress.update)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return target, stopped[0] if stopped else None


def run(args: argparse.Namespace) -> int:
    if args.action == "report":
        return _report(args)
    try:
        suite = load_suite(suite_path(args.suite), TASKS_DIR)
    except SuiteError as exc:
        print(f"harness suite: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        executor = _executor(args.executor, args.cpus)
    except ImportError:
        print("harness suite: the slurm executor is not in this build", file=sys.stderr)
        return EXIT_USAGE
    signer = None
    if args.sign_key is not None:
        try:  # before any member runs
            signer = read_signer(Path(args.sign_key))
        except KeyRefused as exc:
            print(f"harness suite: the signing key is refused: {exc.category}", file=sys.stderr)
            return EXIT_USAGE
    executor_name: Literal["local", "slurm"] = "local" if args.executor == "local" else "slurm"
    suite_run = SuiteRun(suite, executor, executor_name, args.out or Path("receipts-out"))
    if args.dispatch is not None:
        refused = _consume_ticket(args, suite, suite_run)
        if refused is not None:
            print(f"harness suite: {refused}", file=sys.stderr)
            return EXIT_USAGE
    progress = ProgressTable(suite)
    started = time.monotonic()
    if sys.stderr.isatty() and not args.json:
        with Live(
            console=Console(stderr=True), refresh_per_second=2, get_renderable=progress.table
        ):
            target, stopped = asyncio.run(_run_suite(suite_run, progress))
    else:
        target, stopped = asyncio.run(_run_suite(suite_run, progress))
    wall_s = time.monotonic() - started
    result = audit_suite_bytes(read_suite_file(target))
    summary = {
        "suite": str(target),
        "suite_receipt_id": result.suite_receipt_id,
        "zip_sha256": result.zip_sha256,
        "valid": result.valid,
        "members": result.members,
        "members_with_receipt": result.members_with_receipt,
        "max_concurrency": executor.max_running,
        "wall_s": round(wall_s, 1),
    }
    if signer is not None and result.valid:
        summary["signature"] = str(sign_suite_receipt(target, signer))
        summary["signed_by"] = fingerprint(signer.public_key)
    if args.json:
        sys.stdout.write(canonical(summary).decode() + "\n")
    else:
        for key, value in summary.items():
            print(f"{key:<22} {value}")
    if not result.valid:
        return EXIT_INVALID
    if stopped is not None:
        return 130 if stopped == "SIGINT" else 143
    return EXIT_OK


def _consume_ticket(args: argparse.Namespace, suite: Suite, suite_run: SuiteRun) -> str | None:
    """Consume the suite ticket for this run (once; before any member starts) and give
    the run its ticket; or why not. Members write into the out directory, which must lie
    outside the checkout: a file there would make every member's tree dirty."""
    out = args.out or receipts_dir()
    if inside(out, REPO):
        return "with --dispatch, --out must be outside the checkout"
    suite_run.out_dir = out
    try:
        ticket = read_ticket(args.dispatch)
        source = bind_source(REPO, refuse_dirty=True)
        consume_for_suite(ticket, suite.sha256, source, ledger_dir(), suite_run.suite_id)
    except DispatchRefused as refusal:
        return f"dispatch ticket refused: {refusal.category}"
    suite_run.ticket = SuiteTicket(path=args.dispatch.absolute(), sha256=ticket.digest())
    return None


def _report(args: argparse.Namespace) -> int:
    try:
        data = read_suite_file(args.receipt)
    except OSError as exc:
        print(f"harness suite: cannot read the receipt ({type(exc).__name__})", file=sys.stderr)
        return EXIT_USAGE
    _result, record, members = audit_suite_and_read(data)
    if record is None:
        print("harness suite: the suite receipt does not audit (harness audit)", file=sys.stderr)
        return 1
    sys.stdout.write(canonical(suite_report(record, members)).decode() + "\n")
    return EXIT_OK
