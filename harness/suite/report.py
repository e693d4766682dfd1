"""The figures of an audited suite: per task, profile and agent, and per language.

Computed only from a suite receipt that audits valid, and from each member's own
records (never from the suite's claims): trials, accepted, pass rate with a Wilson 95%
interval, the failed stage and category of each failure, wall time median and p90, and
peak memory. The pass rate is accepted over judged: every member with a receipt except
the cancelled ones (stopped, never judged). Any other verdict counts as not passed,
harness failures included: a model whose code breaks the test run reads
`failed_verification` (report_inconsistent), so leaving such verdicts out would raise
its rate. `accepted_unguarded` (a pass judged in the solution's own process, which it
could have written) is not a pass either: it is counted apart as `unguarded`. Every
verdict is listed beside the rate, and `scored` (accepted + task_incomplete) is given
for a reader who wants the narrower count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from receipts.failure import failure_reason
from receipts.records.legacy import AnySuiteRecord, suite_dispatch
from receipts.records.memory import MemoryRecord
from receipts.records.suite import SuiteMember
from receipts.recordset import RecordSet

Z95 = 1.959963984540054
SCORED = ("accepted", "task_incomplete")


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for a binomial proportion; None for n = 0."""
    if n == 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def percentile(values: list[int], q: float) -> int | None:
    """Nearest-rank percentile (q in (0, 1]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def peak_memory(records: RecordSet) -> int | None:
    """The largest QEMU + host worker cgroup usage sampled during the trial."""
    memory = records.memory
    if not isinstance(memory, MemoryRecord):
        return None
    peaks = [
        (s.qemu_usage_bytes or 0) + (s.worker_usage_bytes or 0)
        for s in memory.samples
        if s.qemu_usage_bytes is not None or s.worker_usage_bytes is not None
    ]
    return max(peaks) if peaks else None


def agent_label(member: SuiteMember) -> str:
    return "model" if member.script is None else f"scripted:{member.script}"


@dataclass
class _Group:
    trials: int = 0
    with_receipt: int = 0
    judged: int = 0
    accepted: int = 0
    unguarded: int = 0
    scored: int = 0

    def add(self, member: SuiteMember) -> None:
        self.trials += 1
        if member.verdict is not None:
            self.with_receipt += 1
        if member.verdict is not None and member.verdict != "cancelled":
            self.judged += 1
        if member.verdict in SCORED:
            self.scored += 1
        if member.verdict == "accepted":
            self.accepted += 1
        if member.verdict == "accepted_unguarded":
            self.unguarded += 1

    def figures(self) -> dict[str, Any]:
        interval = wilson(self.accepted, self.judged)
        return {
            "trials": self.trials,
            "with_receipt": self.with_receipt,
            "judged": self.judged,
            "scored": self.scored,
            "accepted": self.accepted,
            "unguarded": self.unguarded,
            "pass_rate": round(self.accepted / self.judged, 4) if self.judged else None,
            "wilson95": [round(interval[0], 4), round(interval[1], 4)] if interval else None,
        }


def _group_rows(record: AnySuiteRecord, members: dict[str, RecordSet]) -> Iterable[dict[str, Any]]:
    keys: dict[tuple[str, str, str], list[SuiteMember]] = {}
    for member in record.members:
        keys.setdefault((member.task, member.profile, agent_label(member)), []).append(member)
    for (task, profile, agent), group_members in sorted(keys.items()):
        group = _Group()
        verdicts: dict[str, int] = {}
        failures: dict[str, dict[str, int]] = {}
        missing: dict[str, int] = {}
        walls: list[int] = []
        peaks: list[int] = []
        for member in group_members:
            group.add(member)
            if member.missing is not None:
                missing[member.missing] = missing.get(member.missing, 0) + 1
            records = members.get(member.member_id)
            if member.verdict is not None:
                verdicts[member.verdict] = verdicts.get(member.verdict, 0) + 1
            if records is None or records.trial is None:
                continue
            walls.append(records.trial.ended_unix_ms - records.trial.started_unix_ms)
            reason = failure_reason(records)
            if reason is not None:
                by_stage = failures.setdefault(reason.stage, {})
                by_stage[reason.category] = by_stage.get(reason.category, 0) + 1
            peak = peak_memory(records)
            if peak is not None:
                peaks.append(peak)
        yield {
            "task": task,
            "language": group_members[0].language,
            "profile": profile,
            "agent": agent,
            **group.figures(),
            "verdicts": dict(sorted(verdicts.items())),
            "failures_by_stage": {s: dict(sorted(c.items())) for s, c in sorted(failures.items())},
            "missing": dict(sorted(missing.items())),
            "wall_ms_median": percentile(walls, 0.5),
            "wall_ms_p90": percentile(walls, 0.9),
            "peak_memory_bytes": max(peaks) if peaks else None,
        }


def suite_report(record: AnySuiteRecord, members: dict[str, RecordSet]) -> dict[str, Any]:
    """The report of a suite that audited valid (its record and its members' records)."""
    rows = list(_group_rows(record, members))
    languages: dict[tuple[str, str, str], _Group] = {}
    for member in record.members:
        key = (member.language, member.profile, agent_label(member))
        languages.setdefault(key, _Group()).add(member)
    walls = [
        rs.trial.ended_unix_ms - rs.trial.started_unix_ms
        for rs in members.values()
        if rs.trial is not None
    ]
    suite_wall = record.ended_unix_ms - record.started_unix_ms
    return {
        "schema": "harness.suite.report/1",
        "suite_id": record.suite_id,
        "name": record.name,
        "suite_sha256": record.suite_sha256,
        "executor": record.executor,
        "dispatch_sha256": suite_dispatch(record),
        "members": len(record.members),
        "max_concurrency": record.max_concurrency,
        "wall_ms": suite_wall,
        "member_wall_ms_sum": sum(walls),
        "member_wall_over_suite_wall": round(sum(walls) / suite_wall, 2) if suite_wall else None,
        "verdicts": {v.verdict: v.count for v in record.verdicts},
        "missing": {m.reason: m.count for m in record.missing},
        "groups": rows,
        "languages": [
            {"language": lang, "profile": profile, "agent": agent, **group.figures()}
            for (lang, profile, agent), group in sorted(languages.items())
        ],
    }
