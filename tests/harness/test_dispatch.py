"""One-shot dispatch: issue from a clean tree, consume once, bound to its tree."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dispatch import (
    DispatchRefused,
    admit,
    consume,
    issue_ticket,
    read_ticket,
    write_ticket,
)
from receipts.records import SourceRecord

COMMIT, TREE, OTHER = "c" * 40, "d" * 40, "e" * 40


def _source(tree: str = TREE, state: str = "clean") -> SourceRecord:
    return SourceRecord(
        category="ok",
        kind="git",
        commit=COMMIT,
        tree=tree,
        tree_state=state,
        installed_record_sha256=None,
        duration_ms=1,
    )


@pytest.fixture
def ticket_path(tmp_path: Path) -> Path:
    path = tmp_path / "ticket.json"
    write_ticket(issue_ticket("tiny", "py-one-line-fix", _source()), path)
    return path


def test_issued_ticket_round_trips(ticket_path: Path) -> None:
    ticket = read_ticket(ticket_path)
    assert (ticket.profile, ticket.task, ticket.commit, ticket.tree) == (
        "tiny",
        "py-one-line-fix",
        COMMIT,
        TREE,
    )
    assert len(ticket.nonce) == 64


def test_two_tickets_for_the_same_tree_differ(tmp_path: Path) -> None:
    first = issue_ticket("tiny", "t", _source())
    second = issue_ticket("tiny", "t", _source())
    assert first.digest() != second.digest()


def test_dirty_tree_cannot_issue() -> None:
    with pytest.raises(DispatchRefused) as info:
        issue_ticket("tiny", "t", _source(state="dirty"))
    assert info.value.category == "dirty_tree"


def test_consumed_once_then_refused(ticket_path: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    first = admit(ticket_path, "tiny", "py-one-line-fix", _source(), ledger)
    assert first.category == "ok" and first.consumed_unix_ms is not None
    second = admit(ticket_path, "tiny", "py-one-line-fix", _source(), ledger)
    assert (second.category, second.consumed_unix_ms) == ("already_consumed", None)


@pytest.mark.parametrize(
    ("profile", "task", "source", "category"),
    [
        ("tiny", "py-one-line-fix", _source(tree=OTHER), "tree_mismatch"),
        ("tiny", "py-one-line-fix", _source(state="dirty"), "dirty_tree"),
        ("smollm2", "py-one-line-fix", _source(), "profile_mismatch"),
        ("tiny", "node-bug-fix", _source(), "task_mismatch"),
    ],
)
def test_binding_is_checked_before_the_ticket_is_burnt(
    ticket_path: Path,
    tmp_path: Path,
    *,
    profile: str,
    task: str,
    source: SourceRecord,
    category: str,
) -> None:
    ledger = tmp_path / "ledger"
    assert admit(ticket_path, profile, task, source, ledger).category == category
    assert admit(ticket_path, "tiny", "py-one-line-fix", _source(), ledger).category == "ok"


@pytest.mark.parametrize("damage", ["flip", "extra_field", "not_json", "oversize", "pretty"])
def test_damaged_ticket_is_malformed(ticket_path: Path, tmp_path: Path, damage: str) -> None:
    data = ticket_path.read_bytes()
    if damage == "flip":
        data = data.replace(b'"tiny"', b'"tinz"')  # still valid: a different ticket...
        data = data.replace(b'"nonce":"', b'"nonce":"x', 1)  # ...made invalid by its nonce
    elif damage == "extra_field":
        data = data[:-1] + b',"zzz":1}'
    elif damage == "not_json":
        data = data[:-2]
    elif damage == "pretty":
        data = json.dumps(json.loads(data), indent=1).encode()  # same ticket, other bytes
    else:
        data = data + b" " * 5000
    ticket_path.write_bytes(data)
    with pytest.raises(DispatchRefused) as info:
        admit(ticket_path, "tiny", "py-one-line-fix", _source(), tmp_path / "ledger")
    assert info.value.category == "malformed"


def _race(args: tuple[str, str]) -> str:
    ticket_file, ledger = args
    try:
        consume(read_ticket(Path(ticket_file)), Path(ledger))
    except DispatchRefused as refusal:
        return refusal.category
    return "ok"


def test_racing_consumers_exactly_one_wins(ticket_path: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    with multiprocessing.get_context("fork").Pool(8) as pool:
        results = pool.map(_race, [(str(ticket_path), str(ledger))] * 32)
    assert results.count("ok") == 1
    assert results.count("already_consumed") == 31


def test_unwritable_ledger_is_named(ticket_path: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    record = admit(ticket_path, "tiny", "py-one-line-fix", _source(), blocker / "ledger")
    assert record.category == "ledger_unwritable"


def test_cli_show_and_list(ticket_path: Path, tmp_path: Path) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "harness.cli", "dispatch", "show", str(ticket_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "profile   tiny" in shown.stdout
    ledger = tmp_path / "ledger"
    admit(ticket_path, "tiny", "py-one-line-fix", _source(), ledger)
    listed = subprocess.run(
        [sys.executable, "-m", "harness.cli", "dispatch", "list", "--ledger", str(ledger)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert read_ticket(ticket_path).digest() in listed.stdout
