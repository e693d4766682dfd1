"""`harness suite run`: expand a suite into member trials, run them through an executor,
and bind their receipts into one suite receipt.

Each member is `harness trial ... --json` with its own receipt directory; the executor
(local.py, or the Slurm one) only starts, follows and stops those processes. Once every
member has ended, each receipt is audited here (a member whose receipt does not audit is
recorded as such, which makes the suite invalid) and `suite-<id>.zip` is written: the
member ZIPs stored whole and a closed `suite.json` (receipts/records/suite.py).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.source import bind_source
from harness.suite.executor import Executor, MemberEnd, MemberJob
from harness.suite.spec import Member, Suite
from harness.trial.diskfiles import REPO
from harness.version import HARNESS_VERSION
from receipts.audit import audit_and_read
from receipts.records.suite import MissingReason, SuiteMember, SuiteRecord, aggregate
from receipts.records.trial import Policy, Verdict
from receipts.suitebundle import WrittenSuite, write_suite_bundle

SLACK_S = 600
"""Added to a member's deadlines for its time limit: set-up before the VM and the
bundle after it are not under any profile deadline."""


@dataclass(frozen=True)
class SuiteTicket:
    """The suite dispatch ticket this suite run consumed: each member presents it."""

    path: Path
    sha256: str


def member_argv(
    member: Member,
    receipt_dir: Path,
    backend: str,
    accel: str,
    dispatch: tuple[SuiteTicket, str] | None = None,
) -> tuple[str, ...]:
    """The member's whole command line: this interpreter running this harness's CLI; for
    a dispatched suite (ticket, suite id), the ticket and the member's slot."""
    agent = "model" if member.script is None else f"scripted:{member.script}"
    dispatched: tuple[str, ...] = ()
    if dispatch is not None:
        ticket, suite_id = dispatch
        dispatched = (
            "--dispatch",
            str(ticket.path.absolute()),
            "--suite-member",
            f"{suite_id}/{member.member_id}",
        )
    return (
        sys.executable,
        "-m",
        "harness.cli",
        "trial",
        "--profile",
        member.profile.name,
        "--task",
        member.task,
        "--agent",
        agent,
        "--backend",
        backend,
        "--accel",
        accel,
        "--out",
        str(receipt_dir),
        *dispatched,
        "--json",
    )


def time_limit_s(member: Member) -> int:
    profile = member.profile
    return profile.provisioning.deadline_s + profile.vm.deadline_s + SLACK_S


def member_jobs(
    suite: Suite, work: Path, dispatch: tuple[SuiteTicket, str] | None = None
) -> list[MemberJob]:
    return [
        MemberJob(
            member_id=member.member_id,
            argv=member_argv(
                member,
                work / "members" / member.member_id,
                suite.file.backend,
                suite.file.accel,
                dispatch,
            ),
            memory_bytes=member.profile.memory.host_admission_floor,
            cpus=member.profile.vm.vcpus,
            time_limit_s=time_limit_s(member),
            receipt_dir=work / "members" / member.member_id,
        )
        for member in suite.members
    ]


def _missing(end: MemberEnd) -> MissingReason:
    if end.state == "cancelled":
        never_ran = end.started is False or (end.started is None and end.exit_code is None)
        return "cancelled_before_start" if never_ran else "cancelled_without_receipt"
    if end.state == "lost":
        return "job_lost"
    if end.state == "failed_to_start":
        return "failed_to_start"
    return "no_receipt"


def member_policy(member: Member) -> Policy:
    """What the member's own trial record will say chose its calls (pipeline.policy)."""
    if member.script is not None:
        return "scripted"
    if member.profile.agent.tool_choice == "required":
        return "model_tool_required"
    return "model"


def suite_member(member: Member, end: MemberEnd) -> tuple[SuiteMember, bytes | None]:
    """The member's entry in suite.json and its receipt's bytes (None when it has none
    that audits)."""
    exit_code = end.exit_code if end.exit_code is not None and 0 <= end.exit_code <= 255 else None

    def entry(
        *,
        missing: MissingReason | None,
        trial_id: str | None = None,
        receipt_id: str | None = None,
        zip_sha256: str | None = None,
        verdict: Verdict | None = None,
    ) -> SuiteMember:
        return SuiteMember(
            member_id=member.member_id,
            task=member.task,
            language=member.language,
            profile=member.profile.name,
            policy=member_policy(member),
            script=None if member.script is None else member.script.stem,
            repeat=member.repeat,
            state=end.state,
            exit_code=exit_code,
            trial_id=trial_id,
            receipt_id=receipt_id,
            zip_sha256=zip_sha256,
            verdict=verdict,
            missing=missing,
        )

    if end.receipt_path is None:
        return entry(missing=_missing(end)), None
    try:
        data = end.receipt_path.read_bytes()
    except OSError:
        return entry(missing="no_receipt"), None
    result, records = audit_and_read(data)
    if not result.valid or records is None or records.trial is None:
        return entry(missing="receipt_invalid"), None
    receipt = entry(
        missing=None,
        trial_id=records.trial.trial_id,
        receipt_id=result.receipt_id,
        zip_sha256=result.zip_sha256,
        verdict=result.derived_verdict,
    )
    return receipt, data


@dataclass
class SuiteRun:
    suite: Suite
    executor: Executor
    executor_name: Literal["local", "slurm"]
    out_dir: Path
    suite_id: str = field(default_factory=lambda: secrets.token_hex(16))
    ticket: SuiteTicket | None = None
    """The suite ticket this run consumed (harness suite run --dispatch), if any."""

    @property
    def work(self) -> Path:
        return self.out_dir / f"suite-{self.suite_id}.d"

    async def run(
        self,
        cancel: asyncio.Event,
        on_progress: Callable[[str, str], None],
    ) -> tuple[Path, WrittenSuite]:
        source = bind_source(REPO, refuse_dirty=False)
        started_ms = int(time.time() * 1000)
        dispatch = (self.ticket, self.suite_id) if self.ticket is not None else None
        jobs = member_jobs(self.suite, self.work, dispatch)
        ends = await self.executor.run(jobs, cancel, on_progress)
        entries: list[SuiteMember] = []
        blobs: dict[str, bytes] = {}
        for member, end in zip(self.suite.members, ends, strict=True):
            entry, data = suite_member(member, end)
            entries.append(entry)
            if data is not None:
                blobs[member.member_id] = data
        members = tuple(entries)
        verdicts, missing = aggregate(members)
        record = SuiteRecord(
            suite_id=self.suite_id,
            name=self.suite.file.name,
            suite_sha256=self.suite.sha256,
            source=source,
            harness_version=HARNESS_VERSION,
            executor=self.executor_name,
            started_unix_ms=started_ms,
            ended_unix_ms=max(started_ms, int(time.time() * 1000)),
            max_concurrency=self.executor.max_running,
            members=members,
            verdicts=verdicts,
            missing=missing,
            dispatch_sha256=self.ticket.sha256 if self.ticket is not None else None,
        )
        target = self.out_dir / f"suite-{self.suite_id}.zip"
        return target, write_suite_bundle(record, blobs, target)
