"""Render a valid receipt's records as one static HTML page.

Every value on the page comes from a closed record (categories, counts, digests), and
every value is HTML-escaped anyway. The page has no script, no stylesheet link, no
image source and no font load: it opens the same offline as online.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from harness.report.svg import line_chart, timeline
from receipts.audit import AuditResult
from receipts.records import MemoryRecord, VerificationRecord, WorkerRequestRecord
from receipts.records.legacy import (
    AnyHostStateRecord,
    HostStateRecordV1,
    HostStateRecordV2,
    MemoryRecordV1,
    excluded_trials,
    facet_exclusions,
    facet_unrelated,
)
from receipts.recordset import RecordSet
from receipts.verdict import required_stages, stage_succeeded

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:64rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:left;font-size:.9rem}
th{background:#f3f3f3}.ok{color:#2f6f3a}.bad{color:#a32d2d;font-weight:600}
.warn{color:#8a5a00;font-weight:600}
code{font-size:.85rem}h2{margin-top:2rem}
"""


def _judge(verification: object) -> str:
    """Where the hidden tests' assertions ran (verification/3): ``split`` (a process that
    never imports the agent's code), ``in_process`` or ``not_run``. An older record did
    not say: every hidden test then ran in process (docs/receipts.md)."""
    if isinstance(verification, VerificationRecord):
        return verification.judge
    return "not recorded (in process)"


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _host_state_note(record: AnyHostStateRecord) -> str:
    """Which version the record is and what it left out: an `unchanged` that holds only
    after leaving out another live trial's items must say so, and a `/1` record (an older
    harness, before exclusions existed) must not look as if it had been checked for them.
    Items of no trial (other programs) are counted in the table, per facet."""
    version = f"<code>{escape(record.schema_)}</code>"
    if isinstance(record, HostStateRecordV1):
        return f"<p>{version}: written before exclusions existed; nothing was left out.</p>"
    older = (
        " Written before items of no trial were left out: other programs' were compared."
        if isinstance(record, HostStateRecordV2)
        else ""
    )
    tags = excluded_trials(record)
    if not tags:
        return f"<p>{version}: no other live trial's items were left out.{older}</p>"
    named = ", ".join(f"<code>{escape(tag)}</code>" for tag in tags)
    return f"<p>{version}: left out as other live trials' resources: {named}.{older}</p>"


UNGUARDED_NOTE = (
    "<p class='warn'>Not a guarded pass: the hidden tests ran inside the solution's own "
    "process (the task is judged in process), where the solution's code could have "
    "written this pass itself.</p>"
)


def _verdict_class(verdict: str | None) -> str:
    return {"accepted": "ok", "accepted_unguarded": "warn"}.get(verdict or "", "bad")


def render(result: AuditResult, records: RecordSet | None) -> str:
    sections = [
        f"<h1>Trial receipt</h1><p>Verdict: <span class='{_verdict_class(result.derived_verdict)}'>"
        f"{escape(result.derived_verdict or 'not derived: the receipt is invalid')}</span>"
        f" &middot; audit: {'valid' if result.valid else 'INVALID'}</p>",
        UNGUARDED_NOTE if result.derived_verdict == "accepted_unguarded" else "",
        _table(
            ["field", "value"],
            [
                ("receipt id", result.receipt_id or "-"),
                ("zip sha256", result.zip_sha256),
                ("policy", result.policy or "-"),
                ("worker placement", result.placement or "-"),
                ("worker channel", result.channel or "-"),
            ],
        ),
    ]
    if result.findings:
        sections.append("<h2>Audit findings</h2>")
        sections.append(
            _table(
                ["phase", "rule", "category", "entry"],
                ((f.phase, f.rule, f.category, f.entry or f.entry_index) for f in result.findings),
            )
        )
    if records is None or records.trial is None:
        return _page(sections)
    trial = records.trial
    sections.append(
        _table(
            ["trial", "value"],
            [
                ("profile", trial.profile),
                ("task", trial.task),
                ("backend", trial.backend),
                ("accelerator requested", trial.accel_requested),
                ("dispatched", trial.dispatched),
                ("failed stage", trial.failed_stage or "-"),
                ("harness failed in stage", trial.internal_error_stage or "-"),
            ],
        )
    )
    stages = []
    for stage in required_stages(trial):
        record = records.stage_record(stage)
        if record is not None:
            duration = getattr(record, "duration_ms", None)
            if duration is None:  # model and image records time their parts
                duration = sum(
                    getattr(record, name, 0)
                    for name in ("verify_source_ms", "convert_ms", "verify_gguf_ms", "build_ms")
                )
            stages.append((stage, int(duration), stage_succeeded(record)))
    sections.append("<h2>Stage timeline</h2>" + timeline(stages))
    sections.append(
        _table(
            ["stage", "category"],
            (
                (stage, getattr(records.stage_record(stage), "category", "missing"))
                for stage in required_stages(trial)
            ),
        )
    )
    sections.append("<h2>Memory</h2>")
    sections.extend(_memory_charts(records.memory))
    if records.worker_requests:
        sections.append(
            _table(
                [
                    "request",
                    "admission",
                    "scope",
                    "outcome",
                    "tools",
                    "prompt",
                    "cached",
                    "completion",
                    "ttft ms",
                ],
                (
                    (
                        r.index,
                        r.admission,
                        r.deciding_scope or "-",
                        r.outcome,
                        # how the tools reached the model (worker_request/1 did not say)
                        r.tools_rendering if isinstance(r, WorkerRequestRecord) else "unrecorded",
                        r.prompt_tokens,
                        r.cached_prompt_tokens,
                        r.completion_tokens,
                        r.time_to_first_token_ms if r.time_to_first_token_ms is not None else "-",
                    )
                    for r in records.worker_requests
                ),
            )
        )
    sections.append("<h2>Tool calls</h2>")
    sections.append(
        _table(
            ["#", "turn", "tool", "decision", "decided by", "outcome", "bytes", "truncated"],
            (
                (
                    c.index,
                    c.turn,
                    c.tool,
                    c.decision,
                    c.decided_by,
                    c.outcome,
                    c.output_bytes,
                    c.truncated,
                )
                for c in records.tool_calls
            ),
        )
    )
    if records.verification is not None:
        v = records.verification
        sections.append("<h2>Verification</h2>")
        sections.append(
            _table(
                [
                    "result",
                    "category",
                    "passed",
                    "failed",
                    "errored",
                    "fixture changed",
                    "files changed",
                    "network",
                    "judge",
                ],
                [
                    (
                        v.result,
                        v.category,
                        v.tests_passed,
                        v.tests_failed,
                        v.tests_errored,
                        v.fixture_changed,
                        v.files_changed,
                        v.net_isolation,
                        _judge(v),
                    )
                ],
            )
        )
    sections.append("<h2>Cleanup</h2>")
    sections.append(
        _table(
            ["#", "resource", "status", "evidence", "released by", "ms"],
            (
                (c.index, c.resource, c.status, c.evidence, c.released_by, c.duration_ms)
                for c in records.cleanup
            ),
        )
    )
    if records.hoststate is not None:
        h = records.hoststate
        facets = {
            "routes": h.routes,
            "resolver": h.resolver,
            "listening sockets": h.listening_sockets,
            "cgroups": h.cgroups,
            "firewall": h.firewall,
        }
        sections.append("<h2>Host state</h2>")
        sections.append(_host_state_note(h))
        sections.append(
            _table(
                [
                    "facet",
                    "result",
                    "raw bytes",
                    "before",
                    "after",
                    "other trials' before/after",
                    "no trial's before/after",
                ],
                (
                    (
                        name,
                        f.result,
                        f.raw_bytes,
                        (f.before_sha256 or "-")[:16],
                        (f.after_sha256 or "-")[:16],
                        "{} / {}".format(*facet_exclusions(f)),
                        "{} / {}".format(*facet_unrelated(f)),
                    )
                    for name, f in facets.items()
                ),
            )
        )
    sections.append("<h2>Digests</h2>")
    digests = [("task", records.verification.task_sha256 if records.verification else "-")]
    if records.model is not None:
        digests.append(("model GGUF", records.model.gguf_sha256 or "-"))
    if records.image is not None:
        digests.append(("guest image key", records.image.image_key or "-"))
    if records.source is not None:
        digests.append(("source commit", records.source.commit or "-"))
        digests.append(
            ("source tree", f"{records.source.tree or '-'} ({records.source.tree_state})")
        )
    if records.gate is not None:
        digests.append(("guest runtime pins", records.gate.pin_table_sha256))
    sections.append(_table(["what", "digest"], digests))
    return _page(sections)


def _page(sections: Sequence[str]) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">"
        f"<title>harness receipt</title><style>{STYLE}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


_MEMORY_SERIES = (
    ("host_available_bytes", "host MemAvailable bytes"),
    ("host_page_cache_bytes", "host page cache bytes"),
    ("qemu_working_set_bytes", "QEMU cgroup working set bytes"),
    ("worker_working_set_bytes", "worker cgroup working set bytes"),
)


def _memory_charts(memory: MemoryRecord | MemoryRecordV1 | None) -> list[str]:
    """One chart per series that has readings; a sample whose figure was unread is left
    out of that series, not drawn as zero."""
    if memory is None:
        return ["<p>No memory samples in this receipt.</p>"]
    if isinstance(memory, MemoryRecordV1):
        points = [(s.at_ms, s.headroom_bytes) for s in memory.samples]
        return [line_chart(points, "ms since start", "headroom bytes")]
    charts: list[str] = []
    for field, label in _MEMORY_SERIES:
        series = [(s.at_ms, getattr(s, field)) for s in memory.samples]
        points = [(at, value) for at, value in series if value is not None]
        if points:
            charts.append(line_chart(points, "ms since start", label))
    return charts or ["<p>No memory figure was read in this receipt.</p>"]
