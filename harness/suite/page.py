"""A suite report as one static HTML page (`harness view suite.zip`).

The same rules as a trial's page (harness/report/page.py): every value escaped, no
script, no external resource; the plot is inline SVG (pass rate and its Wilson 95%
interval per task, profile and agent).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from harness.report.page import _page, _table
from receipts.audit.suite import SuiteAuditResult

ROW, LABEL_W, PLOT_W = 18, 330, 360


def pass_rate_plot(groups: Sequence[dict[str, Any]]) -> str:
    """One row per group: a bar for the pass rate, a whisker for its interval; a group
    with nothing scored gets a grey 'not scored' mark instead of a zero."""
    if not groups:
        return "<p>No members.</p>"
    height = ROW * len(groups) + 30
    width = LABEL_W + PLOT_W + 60
    parts = [f'<svg role="img" aria-label="pass rate by task" width="{width}" height="{height}">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = LABEL_W + PLOT_W * tick
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x - 8:.1f}" y="{height - 5}" font-size="10">{tick:.2f}</text>'
        )
    for position, group in enumerate(groups):
        y = position * ROW + 2
        label = f"{group['task']} · {group['profile']} · {group['agent']}"
        parts.append(f'<text x="0" y="{y + 12}" font-size="11">{escape(label)}</text>')
        rate, interval = group["pass_rate"], group["wilson95"]
        if rate is None or interval is None:
            parts.append(
                f'<text x="{LABEL_W}" y="{y + 12}" font-size="11" fill="#888">not scored</text>'
            )
            continue
        parts.append(
            f'<rect x="{LABEL_W}" y="{y + 3}" width="{max(PLOT_W * rate, 1):.1f}" height="10" '
            f'fill="{"#3a7d44" if rate >= 0.5 else "#b33a3a"}"/>'
        )
        low, high = LABEL_W + PLOT_W * interval[0], LABEL_W + PLOT_W * interval[1]
        parts.append(
            f'<line x1="{low:.1f}" y1="{y + 8}" x2="{high:.1f}" y2="{y + 8}" stroke="#222"/>'
            f'<line x1="{low:.1f}" y1="{y + 4}" x2="{low:.1f}" y2="{y + 12}" stroke="#222"/>'
            f'<line x1="{high:.1f}" y1="{y + 4}" x2="{high:.1f}" y2="{y + 12}" stroke="#222"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / (1 << 20):,.0f} MiB"


def _secs(value: int | None) -> str:
    return "-" if value is None else f"{value / 1000:,.1f} s"


def _interval(group: dict[str, Any]) -> str:
    if group["pass_rate"] is None:
        return "-"
    low, high = group["wilson95"]
    return f"{group['pass_rate']:.2f} [{low:.2f}, {high:.2f}]"


def render_suite(result: SuiteAuditResult, report: dict[str, Any] | None) -> str:
    sections = [
        "<h1>harness suite</h1>",
        _table(
            ["field", "value"],
            [
                ("valid", "yes" if result.valid else "no"),
                ("suite receipt id", result.suite_receipt_id or "-"),
                ("zip sha256", result.zip_sha256),
                ("members", result.members),
                ("members with a receipt", result.members_with_receipt),
                ("members that audit", result.members_valid),
            ],
        ),
    ]
    if result.findings:
        sections.append("<h2>Audit findings</h2>")
        sections.append(
            _table(
                ["category", "member"], [(f.category, f.member_id or "-") for f in result.findings]
            )
        )
    if report is None:
        sections.append("<p class='bad'>The suite does not audit: no figures are shown.</p>")
        return _page(sections)
    sections.append("<h2>Suite</h2>")
    sections.append(
        _table(
            ["field", "value"],
            [
                ("name", report["name"]),
                ("suite file sha256", report["suite_sha256"]),
                ("executor", report["executor"]),
                ("max concurrency", report["max_concurrency"]),
                ("wall time", _secs(report["wall_ms"])),
                ("sum of member wall times", _secs(report["member_wall_ms_sum"])),
                ("verdicts", ", ".join(f"{k} {v}" for k, v in report["verdicts"].items())),
                ("missing", ", ".join(f"{k} {v}" for k, v in report["missing"].items()) or "-"),
            ],
        )
    )
    sections.append("<h2>Pass rate (Wilson 95% interval)</h2>")
    sections.append(pass_rate_plot(report["groups"]))
    sections.append("<h2>By language</h2>")
    sections.append(
        _table(
            [
                "language",
                "profile",
                "agent",
                "trials",
                "judged",
                "accepted",
                "unguarded",
                "pass rate [95%]",
            ],
            [
                (
                    g["language"],
                    g["profile"],
                    g["agent"],
                    g["trials"],
                    g["judged"],
                    g["accepted"],
                    g["unguarded"],
                    _interval(g),
                )
                for g in report["languages"]
            ],
        )
    )
    sections.append("<h2>By task, profile and agent</h2>")
    sections.append(
        _table(
            [
                "task",
                "profile",
                "agent",
                "trials",
                "accepted",
                "unguarded",
                "pass rate [95%]",
                "failures",
                "wall median",
                "wall p90",
                "peak memory",
            ],
            [
                (
                    g["task"],
                    g["profile"],
                    g["agent"],
                    g["trials"],
                    g["accepted"],
                    g["unguarded"],
                    _interval(g),
                    "; ".join(
                        f"{stage}: " + ", ".join(f"{c} {n}" for c, n in cats.items())
                        for stage, cats in g["failures_by_stage"].items()
                    )
                    or "-",
                    _secs(g["wall_ms_median"]),
                    _secs(g["wall_ms_p90"]),
                    _mib(g["peak_memory_bytes"]),
                )
                for g in report["groups"]
            ],
        )
    )
    return _page(sections)
