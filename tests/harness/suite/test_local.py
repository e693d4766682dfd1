"""The local executor with real member processes.

A member here is a small Python program that behaves as `harness trial` does at its
edges (it writes `trial-<id>.zip` into its receipt directory, and answers SIGTERM by
writing it and exiting 143): what the executor is responsible for (admission through the
ledger, concurrency, stopping, time limits, ends) is exercised for real and fast. The
real trial behind it is covered by the integration test (test_suite_vm.py)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from harness.suite.executor import MemberEnd, MemberJob
from harness.suite.ledger import Capacity, Ledger
from harness.suite.local import LocalExecutor

GIB = 1 << 30
MEMBER = """
import os, signal, sys, time
out = sys.argv[1]
def receipt(code):
    with open(os.path.join(out, "trial-" + "ab" * 16 + ".zip"), "wb") as f:
        f.write(b"r")
    sys.exit(code)
signal.signal(signal.SIGTERM, lambda *_: receipt(143))
time.sleep(float(sys.argv[2]))
receipt(int(sys.argv[3]))
"""


def job(
    tmp: Path,
    member_id: str,
    sleep_s: float,
    *,
    code: int = 0,
    cpus: int = 1,
    time_limit_s: int = 600,
    memory: int = GIB,
) -> MemberJob:
    receipt_dir = tmp / "members" / member_id
    return MemberJob(
        member_id=member_id,
        argv=(sys.executable, "-c", MEMBER, str(receipt_dir), str(sleep_s), str(code)),
        memory_bytes=memory,
        cpus=cpus,
        time_limit_s=time_limit_s,
        receipt_dir=receipt_dir,
    )


def run(
    executor: LocalExecutor,
    jobs: list[MemberJob],
    cancel_when_running: bool = False,
) -> tuple[list[MemberEnd], list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []

    async def go() -> list[MemberEnd]:
        cancel = asyncio.Event()

        def progress(member_id: str, state: str) -> None:
            events.append((member_id, state))
            if cancel_when_running and state == "running":
                asyncio.get_running_loop().call_later(0.5, cancel.set)

        return await executor.run(jobs, cancel, progress)

    return asyncio.run(go()), events


def _most_running(events: list[tuple[str, str]]) -> int:
    running, most = set(), 0
    for member_id, state in events:
        if state == "running":
            running.add(member_id)
        elif state not in ("queued",):
            running.discard(member_id)
        most = max(most, len(running))
    return most


def test_members_run_concurrently_up_to_the_ledgers_capacity(tmp_path: Path) -> None:
    executor = LocalExecutor(Ledger(tmp_path / "ledger.json", Capacity(64 * GIB, 2)))
    jobs = [job(tmp_path, f"{n:04d}", 1.0, code=n % 2) for n in range(5)]
    ends, events = run(executor, jobs)
    assert [e.member_id for e in ends] == [j.member_id for j in jobs]
    assert all(e.state == "finished" and e.receipt_path is not None for e in ends)
    assert [e.exit_code for e in ends] == [0, 1, 0, 1, 0]
    assert executor.max_running == 2 == _most_running(events)
    assert Ledger(tmp_path / "ledger.json").reserved() == (0, 0), "all released"


def test_memory_bounds_concurrency_too(tmp_path: Path) -> None:
    executor = LocalExecutor(Ledger(tmp_path / "ledger.json", Capacity(3 * GIB, 64)))
    ends, events = run(executor, [job(tmp_path, f"{n:04d}", 0.5, memory=2 * GIB) for n in range(3)])
    assert all(e.state == "finished" for e in ends)
    assert executor.max_running == 1 == _most_running(events)


def test_cancel_stops_running_members_and_starts_no_more(tmp_path: Path) -> None:
    executor = LocalExecutor(Ledger(tmp_path / "ledger.json", Capacity(64 * GIB, 1)))
    jobs = [job(tmp_path, f"{n:04d}", 60.0) for n in range(3)]
    ends, _events = run(executor, jobs, cancel_when_running=True)
    first, *rest = ends
    assert first.state == "cancelled" and first.exit_code == 143
    assert first.receipt_path is not None, "the stopped member wrote its receipt"
    assert all(e.state == "cancelled" and e.exit_code is None for e in rest)
    assert all(e.receipt_path is None for e in rest)


def test_a_member_past_its_time_limit_is_stopped(tmp_path: Path) -> None:
    executor = LocalExecutor(Ledger(tmp_path / "ledger.json", Capacity(64 * GIB, 2)))
    ends, _ = run(executor, [job(tmp_path, "0000", 60.0, time_limit_s=1)])
    assert ends[0].state == "cancelled" and ends[0].exit_code == 143


def test_a_member_the_host_cannot_hold_fails_to_start(tmp_path: Path) -> None:
    executor = LocalExecutor(Ledger(tmp_path / "ledger.json", Capacity(4 * GIB, 2)))
    ends, _ = run(executor, [job(tmp_path, "0000", 0.1, cpus=4), job(tmp_path, "0001", 0.1)])
    assert ends[0].state == "failed_to_start" and ends[0].exit_code is None
    assert ends[1].state == "finished"


def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    executor = LocalExecutor(Ledger(tmp_path / "ledger.json", Capacity(4 * GIB, 2)))
    bad = MemberJob("0000", (str(tmp_path / "absent"),), GIB, 1, 60, tmp_path / "m" / "0000")
    ends, _ = run(executor, [bad])
    assert ends[0].state == "failed_to_start"
    assert Ledger(tmp_path / "ledger.json").reserved() == (0, 0)
