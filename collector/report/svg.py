"""Plots as inline SVG, drawn here: no plotting library, no script, nothing fetched.

Each function takes the numbers and returns one ``<svg>`` element (text) that sizes itself to
its container; colours come from one palette, so a series has the same colour in every plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bar_chart", "line_chart"]

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0")
WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 28, 70


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / count
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * step:
            step *= m
            break
    return [i * step for i in range(math.ceil(top / step) + 1)]


def _label(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.3g}"


def _frame(title: str, unit: str, ticks: Sequence[float], low: float) -> tuple[list[str], float, float]:
    """The outline, title, y grid and labels; returns the parts and the y of 0 and the scale."""
    high = ticks[-1]
    span = (high - low) or 1.0
    plot_h = HEIGHT - TOP - BOTTOM
    scale = plot_h / span
    zero = TOP + high * scale
    parts = [f'<text x="{LEFT}" y="16" class="title">{escape(title)}</text>']
    for t in ticks:
        y = TOP + (high - t) * scale
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_label(t)}</text>')
    parts.append(
        f'<text transform="translate(14 {TOP + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" class="tick">'
        f"{escape(unit)}</text>"
    )
    return parts, zero, scale


def _legend(names: Sequence[str]) -> list[str]:
    parts = []
    for i, name in enumerate(names):
        y = TOP + 6 + i * 18
        parts.append(
            f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 9}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        parts.append(f'<text x="{WIDTH - RIGHT + 28}" y="{y}" class="tick">{escape(name[:20])}</text>')
    return parts


def _svg(parts: Sequence[str], title: str) -> str:
    body = "\n".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}">\n'
        f"{body}\n</svg>"
    )


def bar_chart(categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, unit: str) -> str:
    """Grouped bars: one group per category, one bar per series (negative values go down)."""
    categories = [str(c) for c in categories]
    values = [v for vs in series.values() for v in vs if math.isfinite(v)] or [0.0]
    low_ticks = _ticks(-min(0.0, min(values)))
    ticks = _ticks(max(0.0, max(values)))
    low = -low_ticks[-1] if min(values) < 0 else 0.0
    below = [-t for t in reversed(low_ticks[1:])] if low else []
    parts, zero, scale = _frame(title, unit, [*below, *ticks], low)
    if low:
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{zero:.1f}" y2="{zero:.1f}" class="axis"/>')
    n = max(1, len(categories))
    group = (WIDTH - LEFT - RIGHT) / n
    bar = group * 0.8 / max(1, len(series))
    for c, category in enumerate(categories):
        x0 = LEFT + c * group + group * 0.1
        for s, (name, vs) in enumerate(series.items()):
            v = vs[c] if math.isfinite(vs[c]) else 0.0
            y, h = (zero - v * scale, v * scale) if v >= 0 else (zero, -v * scale)
            colour = PALETTE[s % len(PALETTE)]
            parts.append(
                f'<rect x="{x0 + s * bar:.1f}" y="{y:.1f}" width="{max(bar - 1, 1):.1f}" height="{max(h, 0):.1f}" '
                f'fill="{colour}">'
                f"<title>{escape(category)} · {escape(name)}: {_label(v)} {escape(unit)}</title></rect>"
            )
        cx = LEFT + c * group + group / 2
        parts.append(
            f'<text transform="translate({cx:.1f} {HEIGHT - BOTTOM + 12}) rotate(35)" class="tick">'
            f"{escape(str(category)[:18])}</text>"
        )
    parts += _legend(list(series))
    return _svg(parts, title)


def line_chart(xs: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, unit: str) -> str:
    """One line per series over the labels ``xs`` (days), with a dot per point."""
    values = [v for vs in series.values() for v in vs if math.isfinite(v)] or [0.0]
    parts, zero, scale = _frame(title, unit, _ticks(max(values)), 0.0)
    n = max(1, len(xs) - 1)
    step = (WIDTH - LEFT - RIGHT) / n
    for s, (name, vs) in enumerate(series.items()):
        colour = PALETTE[s % len(PALETTE)]
        points = [(LEFT + i * step, zero - (v if math.isfinite(v) else 0.0) * scale) for i, v in enumerate(vs)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for (x, y), v, label in zip(points, vs, xs, strict=True):
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}">'
                f"<title>{escape(name)} {escape(label)}: {_label(v)} {escape(unit)}</title></circle>"
            )
    every = max(1, len(xs) // 10)
    for i, label in enumerate(xs):
        if i % every == 0:
            parts.append(
                f'<text transform="translate({LEFT + i * step:.1f} {HEIGHT - BOTTOM + 12}) rotate(35)" class="tick">'
                f"{escape(label)}</text>"
            )
    parts += _legend(list(series))
    return _svg(parts, title)
