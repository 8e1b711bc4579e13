"""A line chart as a small SVG file (the docs' figures: GitHub draws SVG inline; no plotting
library is installed here). Series of (x, y) points, y a share in [0, 1], and horizontal marks."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    marks: Sequence[tuple[str, float]] = (),
    *,
    x_label: str,
    y_label: str,
    title: str,
    width: int = 760,
    height: int = 420,
) -> str:
    left, right, top, bottom = 60, 250, 40, 50
    w, h = width - left - right, height - top - bottom
    xs = [x for pts in series.values() for x, _ in pts] or [0.0, 1.0]
    x0, x1 = min(0.0, min(xs)), max(xs) or 1.0

    def px(x: float) -> float:
        return left + w * (x - x0) / (x1 - x0)

    def py(y: float) -> float:
        return top + h * (1 - y)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14">{html.escape(title)}</text>',
    ]
    for k in range(6):  # y grid: 0%, 20%, ... 100%
        y = k / 5
        out.append(
            f'<line x1="{left}" x2="{left + w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{100 * y:.0f}%</text>'
        )
    step = max(1, round((x1 - x0) / 5))
    for k in range(int(x0), int(x1) + 1, step):
        out.append(f'<text x="{px(k):.1f}" y="{top + h + 16}" text-anchor="middle">{k}</text>')
    out.append(
        f'<text x="{left + w / 2}" y="{height - 10}" text-anchor="middle">{html.escape(x_label)}</text>'
    )
    out.append(
        f'<text x="14" y="{top + h / 2}" transform="rotate(-90 14 {top + h / 2})" '
        f'text-anchor="middle">{html.escape(y_label)}</text>'
    )
    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
    for label, y in marks:
        out.append(
            f'<line x1="{left}" x2="{left + w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="black" '
            'stroke-dasharray="5,4"/>'
        )
        out.append(
            f'<text x="{left + w - 4}" y="{py(y) - 4:.1f}" text-anchor="end">{html.escape(label)}</text>'
        )
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        dash = ' stroke-dasharray="2,3"' if i % 2 else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        ly = top + 14 + 16 * i
        out.append(
            f'<line x1="{left + w + 10}" x2="{left + w + 30}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{left + w + 34}" y="{ly}">{html.escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
