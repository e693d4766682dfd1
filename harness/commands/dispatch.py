"""`harness dispatch issue --profile NAME [--task ID] | --suite SUITE [--out FILE] | list |
show FILE`.

`--suite` issues a suite ticket: one run of that suite file (by its digest) from this
clean checkout, for `harness suite run SUITE --dispatch FILE`.

Tickets are written outside the checkout (`harness.dispatch.tickets_dir()` by default):
a ticket file in the checkout, even an ignored one, makes the dispatched trial's tree
dirty, and committing one changes the commit the ticket names. `--out` inside the
checkout is refused for the same reason. `list` reads the one ledger the trial writes.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from harness.dispatch import (
    AnyTicket,
    DispatchRefused,
    SuiteDispatchTicket,
    consumed_entries,
    inside,
    issue_suite_ticket,
    issue_ticket,
    ledger_dir,
    read_ticket,
    tickets_dir,
    write_ticket,
)
from harness.profiles import ProfileError, load_profile
from harness.source import bind_source
from harness.suite.spec import SuiteError, load_suite

CHECKOUT = Path(__file__).resolve().parents[2]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("dispatch", help="one-shot dispatch tickets for CI")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    issue = actions.add_parser("issue", help="issue a ticket for this clean checkout")
    target = issue.add_mutually_exclusive_group(required=True)
    target.add_argument("--profile", help="profile name (a ticket for one trial)")
    target.add_argument("--suite", help="suite name or file (a ticket for one run of that suite)")
    issue.add_argument("--task", help="with --profile; default: the profile's default task")
    issue.add_argument(
        "--out",
        type=Path,
        help="where to write the ticket (outside the checkout); default: "
        "dispatch-<digest prefix>.json in $XDG_STATE_HOME/harness/tickets "
        "(~/.local/state/harness/tickets)",
    )
    listing = actions.add_parser("list", help="tickets consumed in the ledger")
    listing.add_argument(
        "--ledger",
        type=Path,
        default=None,
        help="default: the ledger `harness trial --dispatch` consumes into, "
        "$XDG_STATE_HOME/harness/dispatch-ledger (~/.local/state/harness/dispatch-ledger)",
    )
    show = actions.add_parser("show", help="validate and print a ticket")
    show.add_argument("ticket", type=Path, help="the ticket file")
    parser.set_defaults(run=run)


def _when(unix_ms: int) -> str:
    return datetime.fromtimestamp(unix_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _issue(args: argparse.Namespace) -> AnyTicket:
    source = bind_source(CHECKOUT, refuse_dirty=True)
    if args.suite is not None:
        from harness.commands.suite import TASKS_DIR, suite_path

        suite = load_suite(suite_path(args.suite), TASKS_DIR)
        return issue_suite_ticket(suite.file.name, suite.sha256, source)
    profile = load_profile(args.profile)
    return issue_ticket(profile.name, args.task or profile.agent.default_task, source)


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "issue":
            if args.out is not None and inside(args.out, CHECKOUT):
                print(
                    "harness dispatch: the ticket must be written outside the checkout "
                    "(a file there makes the dispatched trial's tree dirty); omit --out",
                    file=sys.stderr,
                )
                return 2
            ticket = _issue(args)
            out = args.out or tickets_dir() / f"dispatch-{ticket.digest()[:16]}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            write_ticket(ticket, out)
            print(out.absolute())
        elif args.action == "show":
            ticket = read_ticket(args.ticket)
            print(f"sha256    {ticket.digest()}")
            if isinstance(ticket, SuiteDispatchTicket):
                print(f"suite     {ticket.suite}")
                print(f"suite sha {ticket.suite_sha256}")
            else:
                print(f"profile   {ticket.profile}")
                print(f"task      {ticket.task}")
            print(f"commit    {ticket.commit}")
            print(f"tree      {ticket.tree}")
            print(f"issued    {_when(ticket.issued_unix_ms)}")
        else:
            for digest, consumed in consumed_entries(args.ledger or ledger_dir()):
                print(f"{digest}  {_when(consumed) if consumed >= 0 else 'unreadable'}")
    except DispatchRefused as refusal:
        print(f"harness dispatch: refused: {refusal.category}", file=sys.stderr)
        return 1
    except (ProfileError, SuiteError) as exc:
        print(f"harness dispatch: {exc}", file=sys.stderr)
        return 2
    except FileExistsError:
        print("harness dispatch: the output file exists; not overwritten", file=sys.stderr)
        return 2
    return 0
