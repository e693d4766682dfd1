"""Inline SVG charts: no scripts, no external resources, so the page works offline."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT, PAD = 720, 220, 40


def timeline(stages: Sequence[tuple[str, int, bool]]) -> str:
    """Horizontal bars, one per stage, in order: (name, duration ms, succeeded)."""
    if not stages:
        return "<p>No stage records.</p>"
    total = max(sum(duration for _name, duration, _ok in stages), 1)
    row = 22
    height = row * len(stages) + 10
    parts = [f'<svg role="img" aria-label="stage timeline" width="{WIDTH}" height="{height}">']
    offset = 0
    for position, (name, duration, ok) in enumerate(stages):
        x = 130 + (WIDTH - 230) * offset / total
        width = max((WIDTH - 230) * duration / total, 1)
        y = position * row + 5
        colour = "#3a7d44" if ok else "#b33a3a"
        parts.append(f'<text x="0" y="{y + 14}" font-size="12">{escape(name)}</text>')
        parts.append(f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="16" fill="{colour}"/>')
        parts.append(
            f'<text x="{x + width + 4:.1f}" y="{y + 13}" font-size="11">{duration:,} ms</text>'
        )
        offset += duration
    parts.append("</svg>")
    return "".join(parts)


def line_chart(points: Sequence[tuple[int, int]], x_label: str, y_label: str) -> str:
    """A polyline of (x, y) integer points with labelled axes."""
    if not points:
        return "<p>No samples.</p>"
    xs = [x for x, _y in points]
    ys = [y for _x, y in points]
    x0, x1 = min(xs), max(*xs, min(xs) + 1)
    y1 = max(*ys, 1)

    def sx(x: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (x - x0) / (x1 - x0)

    def sy(y: int) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * y / y1

    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    return (
        f'<svg role="img" aria-label="{escape(y_label)}" width="{WIDTH}" height="{HEIGHT}">'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#444"/>'
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#444"/>'
        f'<polyline fill="none" stroke="#2b6cb0" stroke-width="2" points="{path}"/>'
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" font-size="12" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text x="4" y="{PAD - 10}" font-size="12">{escape(y_label)} (max {y1:,})</text>'
        "</svg>"
    )
