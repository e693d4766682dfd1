"""The host-level reservation ledger: what running trials of every suite hold.

Why one file for the whole host: two suites started side by side each see the whole
machine free; without a shared account each would start as many trials as the host
holds, and together they would oversubscribe it (a trial's cgroup limit is no swap, so
that ends in OOM kills, not slowness). Every local member reserves its profile's host
memory floor and vCPUs here before it starts and releases them when it has ended.

The file (`$XDG_STATE_HOME/harness/suite-ledger.json`) is read and rewritten only under
an exclusive `flock` of its sibling lock file. An entry names the processes that hold it
(the suite's, and the member trial's once started) by pid and kernel start time; an
entry none of whose holders is alive is a dead run's leftover and is dropped on the
next read, so a SIGKILLed suite never keeps the host reserved.

Admission: the reservations plus the new one fit the capacity (memory: MemTotal; CPUs:
the core count unless the operator declares more), and the host's MemAvailable now
covers the new member's floor (other users' programs take memory the ledger never saw).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.dispatch import state_dir
from receipts.kernelfacts import meminfo

LEDGER_NAME = "suite-ledger.json"


def ledger_path() -> Path:
    return state_dir() / LEDGER_NAME


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat):
    with the pid, it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def _meminfo(key: str) -> int:
    """One /proc/meminfo figure in bytes, parsed by receipts/kernelfacts.py; OSError when
    it is missing or malformed (the caller reads that as unread, never as zero)."""
    found = meminfo(Path("/proc/meminfo").read_text()).get(key)
    if found is None:
        raise OSError(f"{key} not in /proc/meminfo")
    return found


@dataclass(frozen=True)
class Capacity:
    memory_bytes: int
    cpus: int

    @classmethod
    def of_host(cls, cpus: int | None = None) -> Capacity:
        return cls(memory_bytes=_meminfo("MemTotal"), cpus=cpus or os.cpu_count() or 1)


@dataclass(frozen=True)
class Holder:
    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> Holder | None:
        start = _start_time(pid)
        return cls(pid, start) if start is not None else None

    def alive(self) -> bool:
        return _start_time(self.pid) == self.start


@dataclass(frozen=True)
class Reservation:
    key: str
    memory_bytes: int
    cpus: int
    holders: tuple[Holder, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "memory_bytes": self.memory_bytes,
            "cpus": self.cpus,
            "holders": [[h.pid, h.start] for h in self.holders],
        }

    @classmethod
    def from_json(cls, data: object) -> Reservation | None:
        """None for an entry we cannot read: it cannot be shown to be live, so it is
        dropped (a corrupt ledger must not block the host for ever)."""
        try:
            assert isinstance(data, dict)
            holders = tuple(Holder(int(p), int(s)) for p, s in data["holders"])
            return cls(str(data["key"]), int(data["memory_bytes"]), int(data["cpus"]), holders)
        except (AssertionError, KeyError, TypeError, ValueError):
            return None

    def live(self) -> bool:
        return any(holder.alive() for holder in self.holders)


class Ledger:
    def __init__(self, path: Path | None = None, capacity: Capacity | None = None) -> None:
        self.path = path or ledger_path()
        self.capacity = capacity or Capacity.of_host()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[Reservation]]:
        """The live entries, under the lock; what the block leaves in the list is written."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                raw = json.loads(self.path.read_text(encoding="utf-8"))
                entries = raw if isinstance(raw, list) else []
            except (OSError, ValueError):
                entries = []
            live = [r for r in map(Reservation.from_json, entries) if r is not None and r.live()]
            yield live
            staged = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
            staged.write_text(json.dumps([r.to_json() for r in live]), encoding="utf-8")
            staged.rename(self.path)
        finally:
            os.close(lock)

    def fits_alone(self, memory_bytes: int, cpus: int) -> bool:
        """Whether the member could ever start here (on an otherwise idle host)."""
        return memory_bytes <= self.capacity.memory_bytes and cpus <= self.capacity.cpus

    def try_reserve(self, memory_bytes: int, cpus: int) -> Reservation | None:
        """Reserve for a member held by this process, or None when it does not fit now."""
        me = Holder.of(os.getpid())
        assert me is not None
        with self._locked() as live:
            memory = sum(r.memory_bytes for r in live) + memory_bytes
            cpu = sum(r.cpus for r in live) + cpus
            if memory > self.capacity.memory_bytes or cpu > self.capacity.cpus:
                return None
            try:
                if _meminfo("MemAvailable") < memory_bytes:
                    return None
            except OSError:
                return None  # unread is not room
            reservation = Reservation(secrets.token_hex(8), memory_bytes, cpus, (me,))
            live.append(reservation)
            return reservation

    def add_holder(self, reservation: Reservation, pid: int) -> Reservation:
        """The member's process holds the reservation too: it stays reserved while the
        trial runs, even if the suite process is killed."""
        holder = Holder.of(pid)
        if holder is None:
            return reservation
        updated = Reservation(
            reservation.key,
            reservation.memory_bytes,
            reservation.cpus,
            (*reservation.holders, holder),
        )
        with self._locked() as live:
            for position, entry in enumerate(live):
                if entry.key == reservation.key:
                    live[position] = updated
        return updated

    def release(self, reservation: Reservation) -> None:
        with self._locked() as live:
            live[:] = [entry for entry in live if entry.key != reservation.key]

    def reserved(self) -> tuple[int, int]:
        """(memory bytes, CPUs) reserved by live entries now."""
        with self._locked() as live:
            return sum(r.memory_bytes for r in live), sum(r.cpus for r in live)
