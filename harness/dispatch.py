"""One-shot dispatch: a ticket that launches exactly one trial of one source tree.

A CI owner issues a ticket from a clean checkout; it binds the profile, the task, the
git commit and tree, and a random nonce. `harness trial --dispatch TICKET` consumes it
before anything else happens, with an exclusive create of `<ticket sha256>` in the
ledger directory (atomic on a local filesystem: of two racing consumers exactly one
succeeds), then checks that the running source is that commit and tree and clean.
A second consumption, another tree, or a dirty tree is refused with a closed category,
and the dispatch record in the receipt says which ticket ran.

Where things live (one function each, used by every command): the ledger is
`ledger_dir()`, tickets are written to `tickets_dir()` and a dispatched trial's receipts
to `receipts_dir()`, all under `state_dir()` (`$XDG_STATE_HOME/harness`, by default
`~/.local/state/harness`): outside the checkout, because any file in the checkout,
ignored or not, makes the next dispatched trial's tree dirty. The ledger is state, not
cache: deleting it would make every consumed ticket usable again. It is only as
one-shot as it is persistent: on ephemeral CI machines keep it on storage that outlives
the run (docs/ci/). Tickets consumed into the ledger's old place
(`~/.cache/harness/dispatch-ledger`) stay consumed: `consume` refuses them too.

A suite ticket (`harness dispatch issue --suite NAME`) names a suite file by its digest
instead of a profile and task. `harness suite run --dispatch` checks its binding and
consumes it once, writing the suite run's id into the ledger entry. Each member trial
then gets the same ticket with the suite id and its member id: it checks the binding
again, finds the suite's consumption naming its suite id (or refuses
`suite_not_consumed`), and consumes its own member slot `<ticket sha256>.<member id>`
by the same exclusive create, so a member slot runs once and a suite ticket serves
exactly one suite run. Every member's receipt names the suite's ticket.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from receipts.canonical import CanonicalError, canonical, parse_canonical
from receipts.records import DispatchRecord, SourceRecord
from receipts.records.base import Record
from receipts.records.dispatch import DispatchCategory
from receipts.types import GitObjectId, Identifier, MemberId, Sha256Hex, TrialId, UnixMillis

MAX_TICKET_BYTES = 4096


def state_dir() -> Path:
    """``$XDG_STATE_HOME/harness``, or ``~/.local/state/harness``: read at call time."""
    base = os.environ.get("XDG_STATE_HOME")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "harness"


def ledger_dir() -> Path:
    """The one consumption ledger: `harness trial --dispatch` and `dispatch list` use it."""
    return state_dir() / "dispatch-ledger"


def legacy_ledger_dirs() -> tuple[Path, ...]:
    """Where earlier versions consumed tickets; still read, never written."""
    return (Path.home() / ".cache" / "harness" / "dispatch-ledger",)


def tickets_dir() -> Path:
    """Where `dispatch issue` writes tickets by default."""
    return state_dir() / "tickets"


def receipts_dir() -> Path:
    """Where a dispatched trial writes its receipt by default."""
    return state_dir() / "receipts"


def inside(path: Path, checkout: Path) -> bool:
    """Whether `path` would land inside the checkout (and so make its tree dirty)."""
    return path.absolute().resolve().is_relative_to(checkout.resolve())


class DispatchTicket(Record):
    schema_: Literal["harness.dispatch.ticket/1"] = Field(
        "harness.dispatch.ticket/1", alias="schema"
    )
    profile: Identifier
    task: Identifier
    commit: GitObjectId
    tree: GitObjectId
    nonce: Sha256Hex
    issued_unix_ms: UnixMillis

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_bytes()).hexdigest()


class SuiteDispatchTicket(Record):
    """A ticket for one run of one suite file (by its digest) from one source tree."""

    schema_: Literal["harness.dispatch.suite-ticket/1"] = Field(
        "harness.dispatch.suite-ticket/1", alias="schema"
    )
    suite: Identifier
    suite_sha256: Sha256Hex
    commit: GitObjectId
    tree: GitObjectId
    nonce: Sha256Hex
    issued_unix_ms: UnixMillis

    def digest(self) -> str:
        return hashlib.sha256(self.canonical_bytes()).hexdigest()


AnyTicket = DispatchTicket | SuiteDispatchTicket


@dataclass(frozen=True)
class SuiteMembership:
    """Which suite run a member trial belongs to, and which member it is."""

    suite_id: TrialId
    member_id: MemberId


class DispatchRefused(Exception):
    def __init__(self, category: DispatchCategory) -> None:
        super().__init__(category)
        self.category: DispatchCategory = category


def _clean_git(source: SourceRecord) -> tuple[str, str]:
    if source.kind != "git" or source.commit is None or source.tree is None:
        raise DispatchRefused("malformed")
    if source.tree_state != "clean":
        raise DispatchRefused("dirty_tree")
    return source.commit, source.tree


def issue_ticket(profile: str, task: str, source: SourceRecord) -> DispatchTicket:
    """A new ticket for the checked-out source; refused unless it is a clean git tree."""
    commit, tree = _clean_git(source)
    return DispatchTicket(
        profile=profile,
        task=task,
        commit=commit,
        tree=tree,
        nonce=secrets.token_hex(32),
        issued_unix_ms=int(time.time() * 1000),
    )


def issue_suite_ticket(suite: str, suite_sha256: str, source: SourceRecord) -> SuiteDispatchTicket:
    """A new ticket for one run of the suite file with this digest, from this clean tree."""
    commit, tree = _clean_git(source)
    return SuiteDispatchTicket(
        suite=suite,
        suite_sha256=suite_sha256,
        commit=commit,
        tree=tree,
        nonce=secrets.token_hex(32),
        issued_unix_ms=int(time.time() * 1000),
    )


def write_ticket(ticket: AnyTicket, path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(ticket.canonical_bytes())


def read_ticket(path: Path) -> AnyTicket:
    """A trial or a suite ticket, by its schema id; anything else is `malformed`."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TICKET_BYTES + 1)
        if len(data) > MAX_TICKET_BYTES:
            raise DispatchRefused("malformed")
        value = parse_canonical(data)
        declared = value.get("schema") if isinstance(value, dict) else None
        if declared == SuiteDispatchTicket.schema_id():
            return SuiteDispatchTicket.model_validate_json(data)
        return DispatchTicket.model_validate_json(data)
    except (OSError, CanonicalError, ValidationError) as exc:
        raise DispatchRefused("malformed") from exc


@dataclass(frozen=True)
class Consumption:
    ticket: AnyTicket
    consumed_unix_ms: int


def _create_once(path: Path, entry: dict[str, object]) -> int:
    """Write the ledger entry by an exclusive create; when it was written."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise DispatchRefused("already_consumed") from exc
    except OSError as exc:
        raise DispatchRefused("ledger_unwritable") from exc
    consumed = int(time.time() * 1000)
    with os.fdopen(fd, "wb") as handle:
        handle.write(canonical({"consumed_unix_ms": consumed, **entry}))
        handle.flush()
        os.fsync(handle.fileno())
    return consumed


def consume(
    ticket: AnyTicket,
    ledger: Path,
    legacy: tuple[Path, ...] | None = None,
    *,
    suite_id: str | None = None,
) -> Consumption:
    """Mark the ticket consumed, exactly once, by an exclusive create in the ledger. A
    ticket an earlier version consumed into a legacy ledger is refused as consumed. A
    suite ticket's entry names the suite run that consumed it (its members look it up)."""
    for old in legacy_ledger_dirs() if legacy is None else legacy:
        if os.path.lexists(old / ticket.digest()):
            raise DispatchRefused("already_consumed")
    entry: dict[str, object] = {"ticket": ticket.to_json()}
    if suite_id is not None:
        entry["suite_id"] = suite_id
    consumed = _create_once(ledger / ticket.digest(), entry)
    return Consumption(ticket=ticket, consumed_unix_ms=consumed)


def consume_for_suite(
    ticket: AnyTicket, suite_sha256: str, source: SourceRecord, ledger: Path, suite_id: str
) -> Consumption:
    """`harness suite run --dispatch`: the ticket must be a suite ticket for this suite
    file and this clean tree; then it is consumed once, in the name of this suite run."""
    if not isinstance(ticket, SuiteDispatchTicket):
        raise DispatchRefused("scope_mismatch")
    if ticket.suite_sha256 != suite_sha256:
        raise DispatchRefused("suite_mismatch")
    _check_tree(ticket, source)
    return consume(ticket, ledger, suite_id=suite_id)


def _suite_consumer(ticket: SuiteDispatchTicket, ledger: Path) -> str | None:
    """The suite id the ledger says consumed this suite ticket; None when none did."""
    try:
        with (ledger / ticket.digest()).open("rb") as handle:
            value = parse_canonical(handle.read(MAX_TICKET_BYTES * 2))
    except (OSError, CanonicalError):
        return None
    suite_id = value.get("suite_id") if isinstance(value, dict) else None
    return suite_id if isinstance(suite_id, str) else None


def consume_member(
    ticket: SuiteDispatchTicket, member: SuiteMembership, ledger: Path
) -> Consumption:
    """A member trial's share of a suite ticket: the suite run it names must have
    consumed the ticket, and its member slot is consumed once."""
    if _suite_consumer(ticket, ledger) != member.suite_id:
        raise DispatchRefused("suite_not_consumed")
    slot = ledger / f"{ticket.digest()}.{member.member_id}"
    consumed = _create_once(
        slot,
        {"ticket_sha256": ticket.digest(), "suite_id": member.suite_id, "member": member.member_id},
    )
    return Consumption(ticket=ticket, consumed_unix_ms=consumed)


def _check_tree(ticket: AnyTicket, source: SourceRecord) -> None:
    if source.tree_state != "clean":
        raise DispatchRefused("dirty_tree")
    if (source.commit, source.tree) != (ticket.commit, ticket.tree):
        raise DispatchRefused("tree_mismatch")


def check_binding(ticket: DispatchTicket, profile: str, task: str, source: SourceRecord) -> None:
    """The trial about to run must be the one the ticket names, from a clean tree."""
    if ticket.profile != profile:
        raise DispatchRefused("profile_mismatch")
    if ticket.task != task:
        raise DispatchRefused("task_mismatch")
    _check_tree(ticket, source)


def dispatch_record(
    ticket: AnyTicket,
    trial: tuple[str, str],
    category: DispatchCategory,
    consumed_unix_ms: int | None,
    duration_ms: int,
    *,
    member: SuiteMembership | None = None,
) -> DispatchRecord:
    """The receipt's dispatch record for the trial (profile, task) this ticket launched.
    Suite scope only for a suite ticket presented by a suite member; a suite ticket
    without a membership, or a trial ticket with one, is a trial-scope record (refused
    `scope_mismatch`)."""
    suite = isinstance(ticket, SuiteDispatchTicket) and member is not None
    if suite:
        assert isinstance(ticket, SuiteDispatchTicket) and member is not None
    return DispatchRecord(
        category=category,
        scope="suite" if suite else "trial",
        dispatch_sha256=ticket.digest(),
        profile=trial[0],
        task=trial[1],
        commit=ticket.commit,
        tree=ticket.tree,
        issued_unix_ms=ticket.issued_unix_ms,
        consumed_unix_ms=consumed_unix_ms,
        duration_ms=duration_ms,
        suite_sha256=ticket.suite_sha256
        if isinstance(ticket, SuiteDispatchTicket) and suite
        else None,
        suite_id=member.suite_id if suite and member is not None else None,
        member_id=member.member_id if suite and member is not None else None,
    )


def admit(
    ticket_path: Path,
    profile: str,
    task: str,
    source: SourceRecord,
    ledger: Path,
    *,
    legacy: tuple[Path, ...] | None = None,
    member: SuiteMembership | None = None,
) -> DispatchRecord:
    """The whole admission of a dispatched trial: read, bind-check, consume.

    The binding is checked before consuming, so a ticket presented to the wrong tree is
    not burnt; consumption is the last step and the one that cannot be repeated. A suite
    ticket admits only a member of the suite run that consumed it (`member`), each
    member slot once; a trial ticket admits no suite member.
    Raises DispatchRefused for a ticket that cannot even be read; otherwise returns the
    record, whose category says whether the trial may run.
    """
    started = time.monotonic()
    ticket = read_ticket(ticket_path)
    try:
        consumption = _consume_as(
            ticket, (profile, task), source, ledger, legacy=legacy, member=member
        )
    except DispatchRefused as refusal:
        elapsed = int((time.monotonic() - started) * 1000)
        return dispatch_record(
            ticket, (profile, task), refusal.category, None, elapsed, member=member
        )
    elapsed = int((time.monotonic() - started) * 1000)
    return dispatch_record(
        ticket, (profile, task), "ok", consumption.consumed_unix_ms, elapsed, member=member
    )


def _consume_as(
    ticket: AnyTicket,
    trial: tuple[str, str],
    source: SourceRecord,
    ledger: Path,
    *,
    legacy: tuple[Path, ...] | None,
    member: SuiteMembership | None,
) -> Consumption:
    """Check the ticket's binding for this trial, then consume it (or its member slot)."""
    if isinstance(ticket, SuiteDispatchTicket) != (member is not None):
        raise DispatchRefused("scope_mismatch")
    if isinstance(ticket, SuiteDispatchTicket):
        assert member is not None
        _check_tree(ticket, source)
        return consume_member(ticket, member, ledger)
    check_binding(ticket, trial[0], trial[1], source)
    return consume(ticket, ledger, legacy)


def consumed_entries(ledger: Path) -> list[tuple[str, int]]:
    """(ticket digest, consumed time) for every consumed ticket in the ledger."""
    entries = []
    for path in sorted(ledger.glob("*")):
        if len(path.name) != 64:
            continue
        try:
            value = parse_canonical(path.read_bytes())
        except (OSError, CanonicalError):
            entries.append((path.name, -1))
            continue
        consumed = value.get("consumed_unix_ms") if isinstance(value, dict) else None
        entries.append((path.name, consumed if isinstance(consumed, int) else -1))
    return entries
