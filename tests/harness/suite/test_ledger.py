"""The host-level ledger: two suites (here: two ledgers, and separate processes) on one
file cannot reserve more than the capacity, and a dead run's reservations go away."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

from harness.suite.ledger import Capacity, Ledger

GIB = 1 << 30


def test_reservations_of_two_ledgers_share_one_capacity(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    capacity = Capacity(memory_bytes=8 * GIB, cpus=4)
    first, second = Ledger(path, capacity), Ledger(path, capacity)
    a = first.try_reserve(3 * GIB, 2)
    b = second.try_reserve(3 * GIB, 2)
    assert a is not None and b is not None
    assert first.try_reserve(1, 1) is None, "CPUs are all reserved"
    assert second.reserved() == (6 * GIB, 4)
    first.release(a)
    assert second.try_reserve(3 * GIB, 3) is None, "3 + 2 CPUs exceed 4"
    c = second.try_reserve(3 * GIB, 2)
    assert c is not None
    assert first.try_reserve(3 * GIB, 0) is None, "9 GiB exceed 8 GiB"


def test_a_member_larger_than_the_host_never_fits(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.json", Capacity(memory_bytes=4 * GIB, cpus=2))
    assert not ledger.fits_alone(14 * GIB, 2)
    assert not ledger.fits_alone(GIB, 4)
    assert ledger.fits_alone(4 * GIB, 2)


def test_a_dead_holders_reservation_is_dropped(tmp_path: Path) -> None:
    """A SIGKILLed suite and its members must not keep the host reserved for ever; a
    reservation held by a live member process stays even after the suite's own
    holder is gone."""
    path = tmp_path / "ledger.json"
    ledger = Ledger(path, Capacity(memory_bytes=8 * GIB, cpus=2))
    reservation = ledger.try_reserve(GIB, 2)
    assert reservation is not None
    member = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ledger.add_holder(reservation, member.pid)
        entries = json.loads(path.read_text())
        # The suite's holder replaced by a pid that is not alive: only the member holds it.
        entries[0]["holders"][0] = [2**22 + 7, 1]
        path.write_text(json.dumps(entries))
        assert ledger.try_reserve(GIB, 1) is None, "the live member still holds 2 CPUs"
    finally:
        member.kill()
        member.wait()
    assert ledger.try_reserve(GIB, 2) is not None, "the member is gone: its entry too"


def test_a_reused_pid_does_not_keep_a_reservation(tmp_path: Path) -> None:
    """A holder is its pid and its start time: our own pid with another start time is
    another process."""
    path = tmp_path / "ledger.json"
    ledger = Ledger(path, Capacity(memory_bytes=8 * GIB, cpus=2))
    assert ledger.try_reserve(GIB, 2) is not None
    entries = json.loads(path.read_text())
    entries[0]["holders"] = [[entries[0]["holders"][0][0], entries[0]["holders"][0][1] + 1]]
    path.write_text(json.dumps(entries))
    assert ledger.try_reserve(GIB, 2) is not None


def _grab(path: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    ledger = Ledger(Path(path), Capacity(memory_bytes=64 * GIB, cpus=3))
    got = 0
    for _ in range(3):
        if ledger.try_reserve(GIB, 1) is not None:
            got += 1
    results.put(got)
    time.sleep(2)  # hold: the process is the holder


def test_concurrent_processes_never_oversubscribe(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.json")
    results: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    workers = [multiprocessing.Process(target=_grab, args=(path, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    granted = sum(results.get(timeout=30) for _ in workers)
    for worker in workers:
        worker.join()
    assert granted == 3, "4 processes x 3 attempts against 3 CPUs: exactly 3 granted"


def test_an_unreadable_ledger_blocks_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    path.write_text("{not json")
    ledger = Ledger(path, Capacity(memory_bytes=8 * GIB, cpus=2))
    assert ledger.try_reserve(GIB, 2) is not None
