"""Plots as inline SVG, drawn here: no plotting library, no script, nothing fetched.

Each function takes the numbers and returns one ``<svg>`` element (text) that sizes itself to
its container; colours come from one palette, so a series has the same colour in every plot.
A label too long for its place is shortened in the middle (:func:`collector.readable.shorten`),
its whole text in a ``<title>`` (the tooltip); the plot grows downwards to fit the labels below it.
A plot with nothing to draw (:func:`has_values`) is for the page to replace with a sentence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

from collector.readable import shorten

__all__ = ["MISSING", "PALETTE", "bar_chart", "has_values", "line_chart"]

PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0")
WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 28, 70
X_LABEL_CHARS = 30
"""The longest label below a plot, in characters; a longer one is shortened (its whole text in a tooltip)."""
LEGEND_CHARS = 20
"""The longest name in a legend, in characters (the legend's column is ``RIGHT`` wide)."""
_CHAR_W = 6.0  # the width of a 10 px character of the tick font, generously (system-ui, digits and letters)
_SLANT = math.radians(35)  # labels below a plot are turned by this, so neighbours do not overlap


def has_values(series: Mapping[str, Sequence[float]]) -> bool:
    """Whether a plot of ``series`` would draw anything: some value finite and not 0."""
    return any(math.isfinite(v) and v != 0 for vs in series.values() for v in vs)


def _bottom(labels: Sequence[str]) -> float:
    """The margin below the plot that the turned ``labels`` need (at least ``BOTTOM``)."""
    longest = min(max((len(t) for t in labels), default=0), X_LABEL_CHARS)
    return max(float(BOTTOM), 20 + longest * _CHAR_W * math.sin(_SLANT) + 12)


def _x_label(x: float, y: float, label: str) -> str:
    """A turned label under the plot at ``x``, shortened to fit, its whole text as its tooltip."""
    short = shorten(label, X_LABEL_CHARS)
    tip = f"<title>{escape(label)}</title>" if short != label else ""
    return (
        f'<text transform="translate({x:.1f} {y:.1f}) rotate({math.degrees(_SLANT):g})" class="tick">'
        f"{escape(short)}{tip}</text>"
    )


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
    plot_h = HEIGHT - TOP - BOTTOM  # the plot's own height: the labels' margin is added below it
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


def _legend(names: Sequence[str], colours: Sequence[str] | None = None) -> list[str]:
    """The legend: ``names`` in ``colours`` (default: the palette in order)."""
    parts = []
    for i, name in enumerate(names):
        y = TOP + 6 + i * 18
        colour = colours[i] if colours is not None else PALETTE[i % len(PALETTE)]
        parts.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        short = shorten(name, LEGEND_CHARS)
        tip = f"<title>{escape(name)}</title>" if short != name else ""
        parts.append(f'<text x="{WIDTH - RIGHT + 28}" y="{y}" class="tick">{escape(short)}{tip}</text>')
    return parts


def _drawn(series: Mapping[str, Sequence[float]]) -> tuple[list[str], list[str]]:
    """The names of the series a plot draws (some value finite and not 0) and their colours: a
    legend names only what is drawn, each series keeping its palette colour."""
    kept = [(n, PALETTE[i % len(PALETTE)]) for i, (n, vs) in enumerate(series.items()) if has_values({n: vs})]
    return [n for n, _ in kept], [c for _, c in kept]


def _svg(parts: Sequence[str], title: str, labels: Sequence[str]) -> str:
    body = "\n".join(parts)
    height = HEIGHT - BOTTOM + _bottom(labels)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
        f'aria-label="{escape(title)}">\n'
        f"{body}\n</svg>"
    )


def bar_chart(categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, unit: str) -> str:
    """Grouped bars: one group per category, one bar per series (negative values go down); ""
    when there is nothing to draw (no category, or every value 0: :func:`has_values`)."""
    categories = [str(c) for c in categories]
    if not categories or not has_values(series):
        return ""
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
        parts.append(_x_label(LEFT + c * group + group / 2, HEIGHT - BOTTOM + 12, category))
    parts += _legend(*_drawn(series))
    return _svg(parts, title, categories)


MISSING = "#d9d9d9"
"""The colour of a day without data behind a time plot (a band, named "no data" in the legend)."""


def line_chart(xs: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, unit: str) -> str:
    """One line per series over the labels ``xs`` (days), with a dot per point; "" when there
    is nothing to draw (no point, or every value 0 or missing: :func:`has_values`). A value that
    is not a number (NaN) is missing: no point, no line through it (a line joins neighbours only),
    and where every series misses it a grey band says "no data" (never drawn as 0)."""
    if not xs or not has_values(series):
        return ""
    values = [v for vs in series.values() for v in vs if math.isfinite(v)] or [0.0]
    parts, zero, scale = _frame(title, unit, _ticks(max(values)), 0.0)
    n = max(1, len(xs) - 1)
    step = (WIDTH - LEFT - RIGHT) / n
    # one point alone stands in the middle, not on the axis where it reads as part of it
    first = LEFT + (WIDTH - LEFT - RIGHT) / 2 if len(xs) == 1 else LEFT
    missing = [i for i in range(len(xs)) if not any(math.isfinite(vs[i]) for vs in series.values())]
    band = step if len(xs) > 1 else WIDTH - LEFT - RIGHT
    for i in missing:
        x0 = max(float(LEFT), first + i * step - band / 2)
        x1 = min(float(WIDTH - RIGHT), first + i * step + band / 2)
        parts.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{x1 - x0:.1f}" height="{zero - TOP:.1f}" fill="{MISSING}" '
            f'class="missing"><title>{escape(xs[i])}: no data</title></rect>'
        )
    names, colours = _drawn(series)
    for name, colour in zip(names, colours, strict=True):
        vs = series[name]
        points = [(first + i * step, zero - v * scale if math.isfinite(v) else None) for i, v in enumerate(vs)]
        run: list[str] = []
        for x, y in [*points, (0.0, None)]:  # a line joins neighbouring points; a missing one ends it
            if y is not None:
                run.append(f"{x:.1f},{y:.1f}")
                continue
            if len(run) > 1:
                parts.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" stroke-width="2"/>')
            run = []
        for (x, y), v, label in zip(points, vs, xs, strict=True):
            if y is not None:
                parts.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">'
                    f"<title>{escape(name)} {escape(label)}: {_label(v)} {escape(unit)}</title></circle>"
                )
    every = max(1, math.ceil(len(xs) / 10))
    shown = [label for i, label in enumerate(xs) if i % every == 0]
    parts += [_x_label(first + i * every * step, HEIGHT - BOTTOM + 12, label) for i, label in enumerate(shown)]
    parts += _legend([*names, *(["no data"] if missing else [])], [*colours, *([MISSING] if missing else [])])
    return _svg(parts, title, shown)
