"""Numbers as a reader takes them in: durations in seconds, minutes, hours or days, UNIX times as
UTC dates, long labels shortened with the whole kept for a tooltip, and values rounded to a few
significant digits for a spreadsheet (the machine-readable exports keep full precision)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["SIGNIFICANT", "counted", "duration", "round_significant", "shorten", "utc_time"]

SIGNIFICANT = 6
"""Significant digits of a value rounded for reading (CSV, XLSX): beyond any measure's accuracy here."""


def duration(seconds: float) -> str:
    """``seconds`` as a person reads a duration: ``45 s``, ``5 min``, ``7.5 h``, ``20.9 days``."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    s = abs(seconds)
    if s < 120:
        return f"{seconds:.3g} s"
    if s < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    if s < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun as a sentence says them: ``1 row``, ``4 rows``, ``0 projects``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def utc_time(seconds: float) -> str:
    """A UNIX time (seconds) as ``YYYY-MM-DD HH:MM UTC`` (``:SS`` only when not a whole minute)."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC" if moment.second else "%Y-%m-%d %H:%M UTC")


def shorten(label: str, limit: int) -> str:
    """``label`` in at most ``limit`` characters: its head and tail around an ellipsis (the tail
    tells names with a common head apart: ``group_atlas.bob@demo`` and ``…@demo @ FNAL``)."""
    if len(label) <= limit:
        return label
    if limit < 5:
        return label[:limit]
    tail = (limit - 1) // 2
    return f"{label[: limit - 1 - tail]}\N{HORIZONTAL ELLIPSIS}{label[-tail:]}"


def round_significant(value: float, digits: int = SIGNIFICANT) -> float:
    """``value`` rounded to ``digits`` significant digits (``0.9999999999999989`` is ``1.0``);
    NaN and infinities as they are."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))
