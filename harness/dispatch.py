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
from receipts.types import GitObjectId, Identifier, Sha256Hex, UnixMillis

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


class DispatchRefused(Exception):
    def __init__(self, category: DispatchCategory) -> None:
        super().__init__(category)
        self.category: DispatchCategory = category


def issue_ticket(profile: str, task: str, source: SourceRecord) -> DispatchTicket:
    """A new ticket for the checked-out source; refused unless it is a clean git tree."""
    if source.kind != "git" or source.commit is None or source.tree is None:
        raise DispatchRefused("malformed")
    if source.tree_state != "clean":
        raise DispatchRefused("dirty_tree")
    return DispatchTicket(
        profile=profile,
        task=task,
        commit=source.commit,
        tree=source.tree,
        nonce=secrets.token_hex(32),
        issued_unix_ms=int(time.time() * 1000),
    )


def write_ticket(ticket: DispatchTicket, path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(ticket.canonical_bytes())


def read_ticket(path: Path) -> DispatchTicket:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TICKET_BYTES + 1)
        if len(data) > MAX_TICKET_BYTES:
            raise DispatchRefused("malformed")
        parse_canonical(data)
        return DispatchTicket.model_validate_json(data)
    except (OSError, CanonicalError, ValidationError) as exc:
        raise DispatchRefused("malformed") from exc


@dataclass(frozen=True)
class Consumption:
    ticket: DispatchTicket
    consumed_unix_ms: int


def consume(
    ticket: DispatchTicket, ledger: Path, legacy: tuple[Path, ...] | None = None
) -> Consumption:
    """Mark the ticket consumed, exactly once, by an exclusive create in the ledger. A
    ticket an earlier version consumed into a legacy ledger is refused as consumed."""
    for old in legacy_ledger_dirs() if legacy is None else legacy:
        if os.path.lexists(old / ticket.digest()):
            raise DispatchRefused("already_consumed")
    try:
        ledger.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(ledger / ticket.digest(), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise DispatchRefused("already_consumed") from exc
    except OSError as exc:
        raise DispatchRefused("ledger_unwritable") from exc
    consumed = int(time.time() * 1000)
    with os.fdopen(fd, "wb") as handle:
        handle.write(canonical({"consumed_unix_ms": consumed, "ticket": ticket.to_json()}))
        handle.flush()
        os.fsync(handle.fileno())
    return Consumption(ticket=ticket, consumed_unix_ms=consumed)


def check_binding(ticket: DispatchTicket, profile: str, task: str, source: SourceRecord) -> None:
    """The trial about to run must be the one the ticket names, from a clean tree."""
    if ticket.profile != profile:
        raise DispatchRefused("profile_mismatch")
    if ticket.task != task:
        raise DispatchRefused("task_mismatch")
    if source.tree_state != "clean":
        raise DispatchRefused("dirty_tree")
    if (source.commit, source.tree) != (ticket.commit, ticket.tree):
        raise DispatchRefused("tree_mismatch")


def dispatch_record(
    ticket: DispatchTicket,
    category: DispatchCategory,
    consumed_unix_ms: int | None,
    duration_ms: int,
) -> DispatchRecord:
    return DispatchRecord(
        category=category,
        dispatch_sha256=ticket.digest(),
        profile=ticket.profile,
        task=ticket.task,
        commit=ticket.commit,
        tree=ticket.tree,
        issued_unix_ms=ticket.issued_unix_ms,
        consumed_unix_ms=consumed_unix_ms,
        duration_ms=duration_ms,
    )


def admit(
    ticket_path: Path,
    profile: str,
    task: str,
    source: SourceRecord,
    ledger: Path,
    *,
    legacy: tuple[Path, ...] | None = None,
) -> DispatchRecord:
    """The whole admission of a dispatched trial: read, bind-check, consume.

    The binding is checked before consuming, so a ticket presented to the wrong tree is
    not burnt; consumption is the last step and the one that cannot be repeated.
    Raises DispatchRefused for a ticket that cannot even be read; otherwise returns the
    record, whose category says whether the trial may run.
    """
    started = time.monotonic()
    ticket = read_ticket(ticket_path)
    try:
        check_binding(ticket, profile, task, source)
        consumption = consume(ticket, ledger, legacy)
    except DispatchRefused as refusal:
        elapsed = int((time.monotonic() - started) * 1000)
        return dispatch_record(ticket, refusal.category, None, elapsed)
    elapsed = int((time.monotonic() - started) * 1000)
    return dispatch_record(ticket, "ok", consumption.consumed_unix_ms, elapsed)


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
