"""The local executor: member trials as processes on this host, as many at once as the
host-level ledger admits.

Why processes and not tasks in one event loop: each member is a whole `harness trial`
with its own signal handling, lease, teardown and receipt, exactly as one run by hand;
the suite only starts, follows and stops them. Members start in the jobs' order; one
that does not fit waits until reservations are released (a later, smaller member does
not overtake it, so a large member is never starved). Each member runs in its own
session, so a terminal's Ctrl-C reaches the suite alone, and the suite stops every
member with SIGTERM: each trial answers with a `cancelled` receipt (exit 143). A member
past its time limit is stopped the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence
from pathlib import Path

from harness.suite.executor import MemberEnd, MemberJob, MemberState, ProgressCallback
from harness.suite.ledger import Ledger, Reservation
from receipts.receiptfile import receipt_files

POLL_S = 0.5
"""How often a waiting member asks the ledger again."""
EXIT_STOPPED = (130, 143)


def receipt_in(directory: Path) -> Path | None:
    """The one trial receipt a member wrote, or None (none, or more than one)."""
    found = receipt_files(directory)
    return found[0] if len(found) == 1 else None


class LocalExecutor:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.running = 0
        self.max_running = 0
        """The most members that ran at once (reported in the suite receipt)."""

    async def run(
        self,
        jobs: Sequence[MemberJob],
        cancel: asyncio.Event,
        on_progress: ProgressCallback,
    ) -> list[MemberEnd]:
        ends: dict[str, MemberEnd] = {}
        started: list[asyncio.Task[MemberEnd]] = []
        for job in jobs:
            on_progress(job.member_id, "queued")
        for job in jobs:
            if not self.ledger.fits_alone(job.memory_bytes, job.cpus):
                on_progress(job.member_id, "too_large")
                ends[job.member_id] = MemberEnd(job.member_id, "failed_to_start", None, None)
                continue
            reservation = None
            while reservation is None and not cancel.is_set():
                reservation = self.ledger.try_reserve(job.memory_bytes, job.cpus)
                if reservation is None:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(cancel.wait(), POLL_S)
            if reservation is None:  # cancelled while waiting
                on_progress(job.member_id, "cancelled")
                ends[job.member_id] = MemberEnd(
                    job.member_id, "cancelled", None, None, started=False
                )
                continue
            started.append(
                asyncio.ensure_future(self._member(job, reservation, cancel, on_progress))
            )
        for end in await asyncio.gather(*started):
            ends[end.member_id] = end
        return [ends[job.member_id] for job in jobs]

    async def _member(
        self,
        job: MemberJob,
        reservation: Reservation,
        cancel: asyncio.Event,
        on_progress: ProgressCallback,
    ) -> MemberEnd:
        job.receipt_dir.mkdir(parents=True, exist_ok=True)
        log = job.receipt_dir.parent / f"{job.member_id}.log"
        try:
            with log.open("wb") as output:
                try:
                    process = await asyncio.create_subprocess_exec(
                        *job.argv,
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=output,
                        stderr=output,
                        start_new_session=True,
                    )
                except OSError:
                    on_progress(job.member_id, "failed_to_start")
                    return MemberEnd(job.member_id, "failed_to_start", None, None, started=False)
                reservation = self.ledger.add_holder(reservation, process.pid)
                self.running += 1
                self.max_running = max(self.max_running, self.running)
                on_progress(job.member_id, "running")
                try:
                    stopped = await self._follow(process, job, cancel)
                finally:
                    self.running -= 1
        finally:
            self.ledger.release(reservation)
        code = process.returncode
        state: MemberState = "cancelled" if stopped and code in EXIT_STOPPED else "finished"
        receipt = receipt_in(job.receipt_dir)
        on_progress(job.member_id, state)
        return MemberEnd(job.member_id, state, code, receipt, started=True)

    async def _follow(
        self, process: asyncio.subprocess.Process, job: MemberJob, cancel: asyncio.Event
    ) -> bool:
        """Wait for the member's exit; stop it on a cancel or at its time limit. Whether
        we stopped it."""
        waiting = asyncio.ensure_future(process.wait())
        cancelled = asyncio.ensure_future(cancel.wait())
        try:
            done, _ = await asyncio.wait(
                {waiting, cancelled},
                timeout=job.time_limit_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if waiting in done:
                return False
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            await waiting  # the trial releases, bundles and exits (its own hurry bounds it)
            return True
        finally:
            cancelled.cancel()
