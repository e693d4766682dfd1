"""SlurmExecutor: each suite member is one Slurm batch job (`--executor slurm`).

Why this shape: labs already run Slurm, so scale-out is "submit and follow", not a
scheduler of our own. One `sbatch` per member, because members of one suite may ask
for different memory/CPU/time (their profiles differ) and an array shares one request.
The batch script is two lines: `exec` of the member's `harness trial ...` argv, so the
trial process itself is the job's batch process and receives Slurm's SIGTERM on
`scancel` or at the time limit; `harness trial` answers it with a `cancelled` receipt
and exit 143 within KillWait (30 s by default, then SIGKILL).

Following without accounting (no slurmdbd, so no `sacct`): `squeue -t all` for every
live job's state word each poll, then `scontrol -o show job ID` once per ended job for
its ExitCode (an ended job is kept for MinJobAge). A job neither shows is `lost`.
`--no-requeue`: a member runs at most once (a requeued trial would write a second
receipt). Every call to a Slurm command has an explicit deadline, and a controller that
answers nothing for CONTROLLER_GONE_S makes every live member `lost` rather than a
wait without end. The receipt is the one `trial-*.zip` that appeared in the member's
receipt directory while its job ran (the directory is on storage the node shares).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from harness.suite.executor import MemberEnd, MemberJob, MemberState, ProgressCallback
from harness.suite.slurmstate import (
    INVALID_JOB_ID,
    NEVER_RUNS_REASONS,
    SQUEUE_FORMAT,
    exit_code,
    member_state,
    parse_scontrol_job,
    parse_squeue,
)
from receipts.receiptfile import receipt_files

CALL_DEADLINE_S = 30.0
"""One squeue/scontrol/scancel call; a healthy controller answers in milliseconds."""
SBATCH_DEADLINE_S = 60.0
"""One sbatch call (the controller may be busy placing jobs)."""
CONTROLLER_GONE_S = 300.0
"""How long the controller may stay unanswering before every live member is `lost`."""
CANCEL_WAIT_S = 150.0
"""After scancel: KillWait (30 s default) plus the controller's kill and epilog; a
member not ended by then is reported `lost` (it left Slurm's view of its end)."""
RUNNING_WORDS = frozenset({"RUNNING", "COMPLETING"})
"""squeue words of a job whose processes hold the node."""

log = structlog.get_logger("harness.suite.slurm")


class SlurmCallFailed(Exception):
    """A Slurm command did not answer within its deadline or could not be started."""


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: str
    stderr: str


async def run_tool(argv: Sequence[str], timeout_s: float, stdin: bytes | None = None) -> ToolResult:
    """Run one Slurm command with a deadline; on the deadline the command is killed and
    SlurmCallFailed raised (a hung client must not hang the suite)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise SlurmCallFailed(f"{argv[0]}: {exc.strerror}") from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise SlurmCallFailed(f"{argv[0]} did not answer within {timeout_s:.0f} s") from None
    assert proc.returncode is not None
    return ToolResult(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def batch_script(argv: Sequence[str]) -> str:
    """The job's script: `exec` the trial, so Slurm's signals reach it and not a shell."""
    return "#!/bin/sh\nexec " + shlex.join(argv) + "\n"


def sbatch_argv(job: MemberJob, extra: Sequence[str], workdir: Path, log_path: Path) -> list[str]:
    """sbatch's options for one member: its requests, rounded up to Slurm's units (MiB,
    whole minutes: Slurm keeps time limits in minutes)."""
    mem_mib = max(1, math.ceil(job.memory_bytes / 2**20))
    minutes = max(1, math.ceil(job.time_limit_s / 60))
    return [
        "sbatch",
        "--parsable",
        f"--job-name=harness-{job.member_id}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={job.cpus}",
        f"--mem={mem_mib}M",
        f"--time={minutes}",
        "--no-requeue",
        f"--chdir={workdir}",
        f"--output={log_path}",
        *extra,
    ]


@dataclass
class _Member:
    job: MemberJob
    before: frozenset[Path]
    job_id: str | None = None
    word: str = ""
    end: MemberEnd | None = None


@dataclass
class SlurmExecutor:
    """Runs members as Slurm batch jobs; see the module docstring.

    sbatch_extra: site options passed to every sbatch (e.g. `--partition=gpu`,
    `--account=lab`). poll_s: how often squeue is asked.
    """

    sbatch_extra: tuple[str, ...] = ()
    poll_s: float = 2.0
    workdir: Path = field(default_factory=Path.cwd)
    controller_gone_s: float = CONTROLLER_GONE_S
    cancel_wait_s: float = CANCEL_WAIT_S
    max_running: int = 0
    """The most members Slurm showed RUNNING (or COMPLETING) at one poll: the suite
    receipt's concurrency reached, as far as the polls could see."""

    async def run(
        self,
        jobs: Sequence[MemberJob],
        cancel: asyncio.Event,
        on_progress: ProgressCallback,
    ) -> list[MemberEnd]:
        """Submit every member, follow them to their ends, scancel all on `cancel`."""
        members = [_Member(job, _receipts(job.receipt_dir)) for job in jobs]
        try:
            for member in members:
                if cancel.is_set():
                    break
                await self._submit(member, on_progress)
            await self._follow(members, cancel, on_progress)
        except BaseException:
            # Our own task was cancelled or failed: leave no job behind us.
            live = [m.job_id for m in members if m.job_id is not None and m.end is None]
            if live:
                with contextlib.suppress(SlurmCallFailed):
                    await asyncio.shield(run_tool(["scancel", *live], CALL_DEADLINE_S))
            raise
        ends: list[MemberEnd] = []
        for member in members:
            if member.end is None:  # never submitted: the suite was cancelled first
                member.end = MemberEnd(member.job.member_id, "cancelled", None, None, started=False)
            ends.append(member.end)
        return ends

    async def _submit(self, member: _Member, on_progress: ProgressCallback) -> None:
        job = member.job
        job.receipt_dir.mkdir(parents=True, exist_ok=True)
        # sbatch expands %-patterns in the path: a literal % in the directory is %%.
        log_path = Path(str(job.receipt_dir).replace("%", "%%")) / "slurm-%j.log"
        argv = sbatch_argv(job, self.sbatch_extra, self.workdir, log_path)
        try:
            result = await run_tool(argv, SBATCH_DEADLINE_S, stdin=batch_script(job.argv).encode())
        except SlurmCallFailed as exc:
            log.warning("sbatch_failed", member=job.member_id, error=str(exc))
            result = None
        job_id = result.stdout.strip().split(";")[0] if result is not None else ""
        if result is None or result.returncode != 0 or not job_id.isdigit():
            if result is not None:
                log.warning("sbatch_refused", member=job.member_id, stderr=result.stderr.strip())
            self._ended(member, "failed_to_start", None, "SBATCH_REFUSED", on_progress)
            return
        member.job_id = job_id
        member.word = "SUBMITTED"
        on_progress(job.member_id, f"SUBMITTED {job_id}")

    async def _follow(
        self, members: list[_Member], cancel: asyncio.Event, on_progress: ProgressCallback
    ) -> None:
        loop = asyncio.get_running_loop()
        last_answer = loop.time()
        cancel_at: float | None = None
        while True:
            live = [m for m in members if m.job_id is not None and m.end is None]
            if not live:
                return
            if cancel.is_set() and cancel_at is None:
                cancel_at = loop.time()
                await self._scancel([m.job_id for m in live if m.job_id is not None])
            try:
                rows = await self._squeue([m.job_id for m in live if m.job_id is not None])
                last_answer = loop.time()
            except SlurmCallFailed as exc:
                log.warning("squeue_failed", error=str(exc))
                rows = None
                if loop.time() - last_answer > self.controller_gone_s:
                    for member in live:
                        self._ended(member, "lost", None, "CONTROLLER_GONE", on_progress)
                    return
            if rows is not None:
                running = sum(1 for word, _ in rows.values() if word in RUNNING_WORDS)
                self.max_running = max(self.max_running, running)
                for member in live:
                    await self._update(member, rows, on_progress)
            if cancel_at is not None and loop.time() - cancel_at > self.cancel_wait_s:
                for member in members:
                    if member.job_id is not None and member.end is None:
                        self._ended(member, "lost", None, "CANCEL_UNANSWERED", on_progress)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cancel.wait(), self.poll_s)

    async def _update(
        self, member: _Member, rows: dict[str, tuple[str, str]], on_progress: ProgressCallback
    ) -> None:
        assert member.job_id is not None
        seen = rows.get(member.job_id)
        if seen is None:
            # Not in squeue: purged already, or the controller forgot it. scontrol decides.
            await self._read_end(member, on_progress)
            return
        word, reason = seen
        if word != member.word:
            member.word = word
            on_progress(member.job.member_id, word)
        if word == "PENDING" and reason in NEVER_RUNS_REASONS:
            log.warning("member_never_runs", member=member.job.member_id, reason=reason)
            await self._scancel([member.job_id])
            self._ended(member, "failed_to_start", None, f"NEVER_RUNS {reason}", on_progress)
            return
        if member_state(word) is not None:
            await self._read_end(member, on_progress)

    async def _read_end(self, member: _Member, on_progress: ProgressCallback) -> None:
        """The ended job's exit code from scontrol; a job scontrol does not know is lost."""
        assert member.job_id is not None
        try:
            result = await run_tool(
                ["scontrol", "-o", "show", "job", member.job_id], CALL_DEADLINE_S
            )
        except SlurmCallFailed as exc:
            log.warning("scontrol_failed", member=member.job.member_id, error=str(exc))
            return  # asked again at the next poll
        end = parse_scontrol_job(result.stdout) if result.returncode == 0 else None
        if end is None or end.job_id != member.job_id:
            if INVALID_JOB_ID in result.stderr:
                self._ended(member, "lost", None, "VANISHED", on_progress)
            return
        state = member_state(end.state)
        if state is None:
            return  # squeue and scontrol disagree for a moment: the next poll settles it
        self._ended(member, state, exit_code(end), end.state, on_progress, started=end.started)

    def _ended(
        self,
        member: _Member,
        state: MemberState,
        code: int | None,
        word: str,
        on_progress: ProgressCallback,
        *,
        started: bool | None = None,
    ) -> None:
        new = _receipts(member.job.receipt_dir) - member.before
        receipt = next(iter(new)) if len(new) == 1 else None
        member.end = MemberEnd(member.job.member_id, state, code, receipt, started=started)
        if word != member.word:
            member.word = word
            on_progress(member.job.member_id, word)

    async def _squeue(self, job_ids: list[str]) -> dict[str, tuple[str, str]]:
        result = await run_tool(
            ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT],
            CALL_DEADLINE_S,
        )
        if result.returncode != 0:
            if INVALID_JOB_ID in result.stderr:
                return {}  # none of them is known any more: each goes to scontrol
            raise SlurmCallFailed(f"squeue exited {result.returncode}")
        return {row.job_id: (row.state, row.reason) for row in parse_squeue(result.stdout).values()}

    async def _scancel(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        try:
            result = await run_tool(["scancel", *job_ids], CALL_DEADLINE_S)
        except SlurmCallFailed as exc:
            log.warning("scancel_failed", error=str(exc))
            return
        if result.returncode != 0:
            log.warning("scancel_refused", stderr=result.stderr.strip())


def _receipts(directory: Path) -> frozenset[Path]:
    """The trial receipts in a member's directory (none when it does not exist yet)."""
    return frozenset(p for p in receipt_files(directory) if p.is_file())


def slurm_available() -> bool:
    """Whether the Slurm client commands are on PATH (the suite CLI's early check)."""
    return all(
        any(os.access(Path(d) / tool, os.X_OK) for d in os.environ.get("PATH", "").split(":"))
        for tool in ("sbatch", "squeue", "scontrol", "scancel")
    )
