"""Dispatch at suite scale: a suite ticket is consumed once by one suite run, and each
member trial admits only as a member of that run, each member slot once.

Every step here is the real function on a real ledger directory (no VM). The suite
command's own consumption is also run as the process a CI owner starts, from a clean
clone: a second `harness suite run --dispatch` with the same ticket is refused before
any member starts. The end-to-end run with real members is
tests/harness/suite/test_slurm_suite.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dispatch import (
    DispatchRefused,
    SuiteDispatchTicket,
    SuiteMembership,
    admit,
    consume_for_suite,
    issue_suite_ticket,
    issue_ticket,
    read_ticket,
    write_ticket,
)
from harness.suite.spec import load_suite
from harness.trial.diskfiles import REPO
from receipts.records import SourceRecord
from tests.harness.cleanclone import clean_clone, dirt
from tests.harness.test_dispatch import COMMIT, OTHER, _source

SUITE_SHA = "5" * 64
SUITE_ID, OTHER_SUITE = "a" * 32, "b" * 32


@pytest.fixture
def suite_ticket(tmp_path: Path) -> Path:
    path = tmp_path / "suite-ticket.json"
    write_ticket(issue_suite_ticket("polyglot-python-slurm", SUITE_SHA, _source()), path)
    return path


def _member(member_id: str, suite_id: str = SUITE_ID) -> SuiteMembership:
    return SuiteMembership(suite_id=suite_id, member_id=member_id)


def _admit(ticket: Path, ledger: Path, member: SuiteMembership | None, **kw: object) -> str:
    source = kw.get("source", _source())
    assert isinstance(source, SourceRecord)
    return admit(ticket, "tiny", "polyglot-py-bowling", source, ledger, member=member).category


def test_a_suite_ticket_round_trips_and_names_the_suite(suite_ticket: Path) -> None:
    ticket = read_ticket(suite_ticket)
    assert isinstance(ticket, SuiteDispatchTicket)
    assert (ticket.suite, ticket.suite_sha256, ticket.commit) == (
        "polyglot-python-slurm",
        SUITE_SHA,
        COMMIT,
    )


def test_the_suite_consumes_its_ticket_once(suite_ticket: Path, tmp_path: Path) -> None:
    """Mutation control: consume_for_suite without its consume() call lets the second
    suite run through (already_consumed is never raised)."""
    ledger, ticket = tmp_path / "ledger", read_ticket(suite_ticket)
    consume_for_suite(ticket, SUITE_SHA, _source(), ledger, SUITE_ID)
    with pytest.raises(DispatchRefused) as second:
        consume_for_suite(ticket, SUITE_SHA, _source(), ledger, OTHER_SUITE)
    assert second.value.category == "already_consumed"


@pytest.mark.parametrize(
    ("suite_sha", "source", "category"),
    [
        ("6" * 64, _source(), "suite_mismatch"),
        (SUITE_SHA, _source(tree=OTHER), "tree_mismatch"),
        (SUITE_SHA, _source(state="dirty"), "dirty_tree"),
    ],
)
def test_the_suite_binding_is_checked_before_the_ticket_is_burnt(
    suite_ticket: Path, tmp_path: Path, *, suite_sha: str, source: SourceRecord, category: str
) -> None:
    ledger, ticket = tmp_path / "ledger", read_ticket(suite_ticket)
    with pytest.raises(DispatchRefused) as refused:
        consume_for_suite(ticket, suite_sha, source, ledger, SUITE_ID)
    assert refused.value.category == category
    consume_for_suite(ticket, SUITE_SHA, _source(), ledger, SUITE_ID)  # still unburnt


def test_a_trial_ticket_does_not_dispatch_a_suite(tmp_path: Path) -> None:
    ticket = issue_ticket("tiny", "py-one-line-fix", _source())
    with pytest.raises(DispatchRefused) as refused:
        consume_for_suite(ticket, SUITE_SHA, _source(), tmp_path / "ledger", SUITE_ID)
    assert refused.value.category == "scope_mismatch"


def test_members_of_the_consuming_suite_admit_each_slot_once(
    suite_ticket: Path, tmp_path: Path
) -> None:
    """Mutation controls: consume_member without the suite-consumer check admits members
    of a suite that never consumed the ticket (`suite_not_consumed` cases fail); with the
    member slot not exclusive, the second 0001 is admitted."""
    ledger, ticket = tmp_path / "ledger", read_ticket(suite_ticket)
    assert _admit(suite_ticket, ledger, _member("0000")) == "suite_not_consumed"
    consume_for_suite(ticket, SUITE_SHA, _source(), ledger, SUITE_ID)
    first = admit(
        suite_ticket, "tiny", "polyglot-py-bowling", _source(), ledger, member=_member("0001")
    )
    assert (first.category, first.scope, first.dispatch_sha256) == ("ok", "suite", ticket.digest())
    assert (first.suite_sha256, first.suite_id, first.member_id) == (SUITE_SHA, SUITE_ID, "0001")
    assert first.consumed_unix_ms is not None
    assert _admit(suite_ticket, ledger, _member("0001")) == "already_consumed"
    assert _admit(suite_ticket, ledger, _member("0002")) == "ok"
    assert _admit(suite_ticket, ledger, _member("0003", OTHER_SUITE)) == "suite_not_consumed"
    assert _admit(suite_ticket, ledger, _member("0004"), source=_source(tree=OTHER)) == (
        "tree_mismatch"
    )


def test_a_ticket_of_one_scope_admits_no_trial_of_the_other(
    suite_ticket: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    consume_for_suite(read_ticket(suite_ticket), SUITE_SHA, _source(), ledger, SUITE_ID)
    alone = admit(suite_ticket, "tiny", "polyglot-py-bowling", _source(), ledger)
    assert (alone.category, alone.scope, alone.suite_id) == ("scope_mismatch", "trial", None)
    trial_ticket = tmp_path / "trial-ticket.json"
    write_ticket(issue_ticket("tiny", "polyglot-py-bowling", _source()), trial_ticket)
    assert _admit(trial_ticket, ledger, _member("0000")) == "scope_mismatch"
    # ...and neither refusal burnt the trial ticket for its own use.
    assert _admit(trial_ticket, ledger, None) == "ok"


def test_the_trial_cli_refuses_a_malformed_membership(suite_ticket: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "trial", "--profile", "tiny"),
            *("--dispatch", str(suite_ticket), "--suite-member", "not-a-member"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2 and "--suite-member" in done.stderr


SUITE = """
name = "dispatch-check"
tasks = ["polyglot-py-bowling"]
profiles = ["tiny"]
agents = ["scripted:oracle"]
"""


def test_a_second_suite_run_with_the_ticket_is_refused_before_any_member(
    tmp_path: Path,
) -> None:
    """From a clean clone, as a CI owner: issue a suite ticket, let a suite run consume
    it (the real consume_for_suite, as `harness suite run --dispatch` calls it), then
    `harness suite run --dispatch` with it: exit 2, refused, no member started, and the
    clone stays clean. A ticket for another suite file is refused the same way."""
    clone = clean_clone(tmp_path / "clone")
    state = tmp_path / "state"
    suite_file = tmp_path / "dispatch-check.toml"
    suite_file.write_text(SUITE)
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),
        "XDG_STATE_HOME": str(state),
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    issued = harness("dispatch", "issue", "--suite", str(suite_file))
    assert issued.returncode == 0, issued.stderr
    ticket_path = Path(issued.stdout.strip())
    ticket = read_ticket(ticket_path)
    assert isinstance(ticket, SuiteDispatchTicket)
    suite = load_suite(suite_file, REPO / "profiles" / "tasks")
    assert ticket.suite_sha256 == suite.sha256
    shown = harness("dispatch", "show", str(ticket_path))
    assert f"suite sha {suite.sha256}" in shown.stdout

    other = tmp_path / "other.toml"
    other.write_text(SUITE.replace("dispatch-check", "other-check"))
    out = tmp_path / "out"
    refused = harness("suite", "run", str(other), "--dispatch", str(ticket_path), "--out", str(out))
    assert refused.returncode == 2 and "suite_mismatch" in refused.stderr
    inside = harness("suite", "run", str(suite_file), "--dispatch", str(ticket_path), "--out", "x")
    assert inside.returncode == 2 and "outside the checkout" in inside.stderr

    source_sha = SourceRecord(
        category="ok",
        kind="git",
        commit=ticket.commit,
        tree=ticket.tree,
        tree_state="clean",
        installed_record_sha256=None,
        duration_ms=1,
    )
    consume_for_suite(
        ticket, suite.sha256, source_sha, state / "harness" / "dispatch-ledger", SUITE_ID
    )
    again = harness(
        "suite", "run", str(suite_file), "--dispatch", str(ticket_path), "--out", str(out)
    )
    assert again.returncode == 2 and "already_consumed" in again.stderr
    assert not out.exists()  # nothing ran, nothing written
    assert dirt(clone) == ""
