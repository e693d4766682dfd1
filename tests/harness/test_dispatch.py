"""One-shot dispatch: issue from a clean tree, consume once, bound to its tree."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.dispatch import (
    DispatchRefused,
    DispatchTicket,
    admit,
    consume,
    consumed_entries,
    issue_ticket,
    ledger_dir,
    read_ticket,
    receipts_dir,
    state_dir,
    tickets_dir,
    write_ticket,
)
from harness.profiles import load_profile
from harness.trial.context import TrialOptions
from harness.trial.evidence import Evidence
from harness.trial.hoststages import dispatch_stage
from receipts.records import SourceRecord
from tests.harness.cleanclone import clean_clone, dirt

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
    assert isinstance(ticket, DispatchTicket)
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


# --- where tickets, receipts and the ledger live (one function each) ---------------------

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "docs" / "ci" / "trial-dispatch.yml"


def test_paths_follow_xdg_state_home_and_are_read_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_dir() == tmp_path / "harness"
    assert ledger_dir() == tmp_path / "harness" / "dispatch-ledger"
    assert tickets_dir() == tmp_path / "harness" / "tickets"
    assert receipts_dir() == tmp_path / "harness" / "receipts"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ledger_dir() == tmp_path / "home" / ".local" / "state" / "harness" / "dispatch-ledger"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/is/ignored")  # as the XDG spec says
    assert state_dir() == tmp_path / "home" / ".local" / "state" / "harness"


def test_trial_consumes_into_the_ledger_list_reads(
    ticket_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One ledger: the trial's dispatch stage consumes into `ledger_dir()` and `harness
    dispatch list` (no --ledger) shows it. Mutation control: put the trial's ledger back
    under its cache (`self.options.cache / "dispatch-ledger"`) and this test fails."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path / "out",
        dispatch=ticket_path,
        cache=tmp_path / "cache",
    )
    evidence = Evidence()
    evidence.put("source", _source())
    dispatch_stage(options, evidence)
    dispatch = evidence.collected().dispatch
    assert dispatch is not None and dispatch.category == "ok"
    digest = read_ticket(ticket_path).digest()
    assert (ledger_dir() / digest).is_file()
    listed = subprocess.run(
        [sys.executable, "-m", "harness.cli", "dispatch", "list"],
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.startswith(f"{digest}  20")


def test_a_ticket_consumed_into_the_old_ledger_stays_consumed(
    ticket_path: Path, tmp_path: Path
) -> None:
    """Moving the ledger must not make earlier consumptions usable again. Mutation
    control: drop the legacy-ledger check in `consume` and this test fails."""
    old, new = tmp_path / "old-ledger", tmp_path / "ledger"
    old.mkdir()
    (old / read_ticket(ticket_path).digest()).write_bytes(b"{}")
    record = admit(ticket_path, "tiny", "py-one-line-fix", _source(), new, legacy=(old,))
    assert record.category == "already_consumed"
    assert not new.exists() or list(new.iterdir()) == []


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    return clean_clone(tmp_path / "clone")


def _harness_in(clone: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the clone's own harness code (PYTHONPATH first) from inside the clone."""
    env = {
        **os.environ,
        "PYTHONPATH": str(clone),
        "XDG_STATE_HOME": str(state),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_issue_writes_the_ticket_outside_the_checkout(clone: Path, tmp_path: Path) -> None:
    """Mutation control: default `--out` back to the current directory and the clone is
    dirty (and the ticket is not under the state directory): this test fails."""
    state = tmp_path / "state"
    done = _harness_in(clone, state, "dispatch", "issue", "--profile", "tiny")
    assert done.returncode == 0, done.stderr
    ticket = Path(done.stdout.strip())
    assert ticket.parent == state / "harness" / "tickets"
    issued = read_ticket(ticket)
    assert isinstance(issued, DispatchTicket) and issued.profile == "tiny"
    assert dirt(clone) == ""  # the next dispatched trial finds a clean tree


def test_issue_refuses_an_out_inside_the_checkout(clone: Path, tmp_path: Path) -> None:
    """Mutation control: drop the `inside(args.out, CHECKOUT)` check and the ticket lands
    in the checkout: this test fails."""
    for out in ("ticket.json", "receipts-out/ticket.json"):
        done = _harness_in(
            clone, tmp_path / "state", "dispatch", "issue", "--profile", "tiny", "--out", out
        )
        assert done.returncode == 2
        assert "outside the checkout" in done.stderr
        assert dirt(clone) == ""


def _workflow_run(name: str) -> str:
    """The `run: |` block of the workflow step called `name`, dedented (as the runner
    hands it to bash). A small reader of this one file's layout, not a YAML parser."""
    lines = WORKFLOW.read_text().splitlines()
    start = lines.index(f"      - name: {name}")
    run = next(i for i in range(start + 1, len(lines)) if lines[i] == "        run: |")
    body = []
    for line in lines[run + 1 :]:
        if line and not line.startswith(" " * 10):
            break
        body.append(line[10:])
    return "\n".join(body).strip() + "\n"


def test_workflow_writes_nothing_into_the_checkout() -> None:
    script = _workflow_run("Run the dispatched trial")
    assert script.startswith("printf") and "exec .venv/bin/harness trial" in script
    assert "${{" not in script  # the ticket arrives through env, never spliced into bash
    assert '--out "$RUNNER_TEMP/receipts"' in script
    assert '> "$RUNNER_TEMP/trial.json"' in script
    assert "tee" not in script


_STAND_IN_HARNESS = """#!{python}
import os, signal, sys, time
from pathlib import Path
report = Path(os.environ["REPORT"])
report.write_text(f"pid {{os.getpid()}} argv {{' '.join(sys.argv[1:])}}\\n")
def cancelled(signum, frame):
    with report.open("a") as handle:
        handle.write(f"signal {{signum}}\\n")
    sys.exit(130)
signal.signal(signal.SIGINT, cancelled)
print("ready", flush=True)
time.sleep(30)
"""


def test_workflow_trial_step_execs_the_harness_so_a_cancel_reaches_it(
    ticket_path: Path, tmp_path: Path
) -> None:
    """GitHub's cancel sends SIGINT to the step's shell only. The step's own script runs
    here under bash, with a stand-in `.venv/bin/harness` (a process that records its pid
    and the signals it gets): it must be the shell's own process (exec), and the SIGINT
    sent to that pid must reach it. Mutation control: drop `exec` from the workflow's
    trial step and this test fails."""
    script = _workflow_run("Run the dispatched trial")
    checkout, temp = tmp_path / "checkout", tmp_path / "runner-temp"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    temp.mkdir()
    os.symlink(sys.executable, checkout / ".venv" / "bin" / "python")
    harness = checkout / ".venv" / "bin" / "harness"
    harness.write_text(_STAND_IN_HARNESS.format(python=sys.executable))
    harness.chmod(0o755)
    report = tmp_path / "report"
    env = {
        **os.environ,
        "TICKET": ticket_path.read_text(),
        "RUNNER_TEMP": str(temp),
        "REPORT": str(report),
    }
    shell = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=checkout,
        env=env,
    )
    deadline = time.monotonic() + 30
    while not (temp / "trial.json").exists() or "ready" not in (temp / "trial.json").read_text():
        assert time.monotonic() < deadline and shell.poll() is None
        time.sleep(0.05)
    os.kill(shell.pid, signal.SIGINT)  # what a cancel does: the step's entry process only
    assert shell.wait(timeout=30) == 130
    lines = report.read_text().splitlines()
    assert lines[0].startswith(f"pid {shell.pid} argv trial --profile tiny --task py-one-line-fix")
    assert f"--dispatch {temp}/ticket.json --out {temp}/receipts --json" in lines[0]
    assert lines[1] == f"signal {signal.SIGINT.value}"
    assert (temp / "ticket.json").read_bytes() == ticket_path.read_bytes()
    assert sorted(p.name for p in checkout.iterdir()) == [".venv"]  # nothing in the checkout


# --- what the ledger and a ticket are on disk --------------------------------------------


def test_the_ledger_is_private_and_a_ticket_is_readable(ticket_path: Path, tmp_path: Path) -> None:
    """Deleting a ledger entry makes its ticket usable again, so the ledger directory is
    the owner's alone (0700) and so is each entry (0600); a ticket is handed to a CI
    runner that may be another user, so it is 0644. Checked under a umask of 0, so the
    modes are the ones the code asks for."""
    old = os.umask(0)
    try:
        written = tmp_path / "fresh-ticket.json"
        write_ticket(issue_ticket("tiny", "t", _source()), written)
        ledger = tmp_path / "state" / "ledger"
        consume(read_ticket(ticket_path), ledger)
    finally:
        os.umask(old)
    assert written.stat().st_mode & 0o777 == 0o644
    assert ledger.stat().st_mode & 0o777 == 0o700
    (entry,) = ledger.iterdir()
    assert entry.stat().st_mode & 0o777 == 0o600


def test_issued_and_consumed_times_are_wall_clock_milliseconds(
    ticket_path: Path, tmp_path: Path
) -> None:
    """The dispatch record carries both times; a reader compares them with other clocks."""
    before = int(time.time() * 1000)
    ticket = issue_ticket("tiny", "t", _source())
    consumed = consume(ticket, tmp_path / "ledger").consumed_unix_ms
    after = int(time.time() * 1000)
    assert before <= ticket.issued_unix_ms <= consumed <= after


def test_consumed_entries_lists_every_ticket_and_names_a_damaged_entry(
    ticket_path: Path, tmp_path: Path
) -> None:
    """`dispatch list` shows every consumption; an entry it cannot read still counts as
    consumed (its time is -1, never dropped), and files that are not entries are skipped."""
    ledger = tmp_path / "ledger"
    consumed = consume(read_ticket(ticket_path), ledger)
    good = read_ticket(ticket_path).digest()
    damaged = {"a" * 64: b"not canonical json", "b" * 64: b"[1]", "c" * 64: b'{"x":1}'}
    for name, data in damaged.items():
        (ledger / name).write_bytes(data)
    (ledger / ("f" * 64)).mkdir()  # an entry that cannot be read at all
    # Not ticket digests; the first sorts before every entry, so the walk must go on.
    (ledger / ("0" * 63)).write_bytes(b"{}")
    (ledger / ("e" * 65)).write_bytes(b"{}")
    assert consumed_entries(ledger) == sorted(
        [(good, consumed.consumed_unix_ms), ("f" * 64, -1), *((name, -1) for name in damaged)]
    )


def test_one_ledger_holds_many_tickets(tmp_path: Path) -> None:
    """The ledger directory is made once and then reused: a second, different ticket is
    consumed into it, not mistaken for a replay."""
    ledger = tmp_path / "ledger"
    for task in ("first", "second"):
        path = tmp_path / f"{task}.json"
        write_ticket(issue_ticket("tiny", task, _source()), path)
        assert admit(path, "tiny", task, _source(), ledger).category == "ok"
    assert len(list(ledger.iterdir())) == 2


@pytest.mark.parametrize("refused", [False, True])
def test_the_admission_duration_is_measured_in_milliseconds(
    tmp_path: Path, *, refused: bool
) -> None:
    """The dispatch record's duration covers reading the ticket: here it arrives through a
    FIFO 300 ms late, so the admission (ok or refused) takes most of those 300 ms and no
    more than the wall time around it."""
    ticket = issue_ticket("tiny", "t", _source())
    fifo = tmp_path / "ticket.fifo"
    os.mkfifo(fifo)

    opened_at: list[float] = []

    def late_writer() -> None:
        time.sleep(0.3)
        opened_at.append(time.monotonic())
        fifo.write_bytes(ticket.canonical_bytes())

    writer = threading.Thread(target=late_writer)
    writer.start()
    started = time.monotonic()
    record = admit(fifo, "tiny", "other-task" if refused else "t", _source(), tmp_path / "l")
    wall_ms = (time.monotonic() - started) * 1000
    writer.join()
    assert record.category == ("task_mismatch" if refused else "ok")
    # admit cannot have read the ticket before the writer opened the FIFO: at least
    # `blocked_ms` passed inside it (half of it as the bound, so a loaded host's
    # scheduling never fails the test; a seconds or microseconds slip is 1000x off).
    blocked_ms = (opened_at[0] - started) * 1000
    assert blocked_ms / 2 <= record.duration_ms <= wall_ms


@pytest.mark.parametrize(
    "changes",
    [
        {"kind": "installed"},  # an installed harness names a commit but is no checkout
        {"commit": None},
        {"tree": None},
    ],
)
def test_only_a_git_checkout_with_commit_and_tree_can_issue(changes: dict[str, object]) -> None:
    source = _source().model_copy(update=changes)
    with pytest.raises(DispatchRefused) as info:
        issue_ticket("tiny", "t", source)
    assert info.value.category == "malformed"
