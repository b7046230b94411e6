"""Allocation awards, as a committee keeps them: per project, an amount of core-hours or GPU-hours
for a period, in a CSV or a TOML file.

CSV: a header ``project,resource,amount,period`` and one award per line; TOML: one ``[[award]]``
table per award with the same four keys. ``resource`` is ``core_hours`` or ``gpu_hours``
(``core-hours``, ``GPU-hours`` are the same); ``amount`` a number of those hours (> 0);
``period`` the days the award covers, UTC and both included: ``2026-11`` (a month), ``2026``
(a year), ``2026-Q4`` (a quarter) or ``2026-11-01/2027-01-31`` (any days). A project given twice
for the same resource and period is refused: the committee's file would say two things.
"""

from __future__ import annotations

import csv
import math
import os
import re
import tomllib
from calendar import monthrange
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from collector.errors import ConfigError

__all__ = ["RESOURCES", "Award", "parse_period", "read_awards"]

RESOURCES = {"core_hours": "core-hours", "gpu_hours": "GPU-hours"}
"""The resources an award is given in, and how the page names their unit."""

_FIELDS = ("project", "resource", "amount", "period")


@dataclass(frozen=True)
class Award:
    """``amount`` hours of ``resource`` (a key of :data:`RESOURCES`) to ``project`` for the UTC
    days ``first`` .. ``last`` (both included)."""

    project: str
    resource: str
    amount: float
    first: date
    last: date

    @property
    def days(self) -> int:
        """The days the award covers."""
        return (self.last - self.first).days + 1


def parse_period(text: str) -> tuple[date, date]:
    """The first and last day of ``text``: ``YYYY``, ``YYYY-MM``, ``YYYY-Qn`` or ``DAY/DAY`` (ISO days)."""
    t = text.strip()
    try:
        if re.fullmatch(r"\d{4}", t):
            return date(int(t), 1, 1), date(int(t), 12, 31)
        if m := re.fullmatch(r"(\d{4})-[Qq]([1-4])", t):
            year, quarter = int(m[1]), int(m[2])
            last_month = 3 * quarter
            return date(year, last_month - 2, 1), date(year, last_month, monthrange(year, last_month)[1])
        if m := re.fullmatch(r"(\d{4})-(\d{2})", t):
            year, month = int(m[1]), int(m[2])
            return date(year, month, 1), date(year, month, monthrange(year, month)[1])
        if "/" in t:
            a, b = (date.fromisoformat(p.strip()) for p in t.split("/", 1))
            if b < a:
                raise ValueError(f"{b} is before {a}")
            return a, b
    except ValueError as exc:
        raise ConfigError(f"period {text!r}: {exc}") from exc
    raise ConfigError(f"period {text!r}: expected YYYY, YYYY-MM, YYYY-Qn or YYYY-MM-DD/YYYY-MM-DD")


def _award(row: dict[str, Any], where: str) -> Award:
    missing = [f for f in _FIELDS if row.get(f) in (None, "")]
    if missing:
        raise ConfigError(f"{where}: {', '.join(missing)} missing (an award is {', '.join(_FIELDS)})")
    resource = str(row["resource"]).strip().lower().replace("-", "_")
    if resource not in RESOURCES:
        raise ConfigError(f"{where}: resource {row['resource']!r}: expected core_hours or gpu_hours")
    try:
        amount = float(str(row["amount"]).replace(",", "").replace("_", ""))
    except ValueError as exc:
        raise ConfigError(f"{where}: amount {row['amount']!r} is not a number of hours") from exc
    if not (math.isfinite(amount) and amount > 0):
        raise ConfigError(f"{where}: amount {row['amount']!r}: an award is a number of hours above 0")
    try:
        first, last = parse_period(str(row["period"]))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    return Award(str(row["project"]).strip(), resource, amount, first, last)


def read_awards(path: str | os.PathLike[str]) -> list[Award]:
    """The awards of a CSV file or, when its name ends in ``.toml``, a TOML file (see the module
    docstring); a :class:`ConfigError` naming the file and line of the first wrong award."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")  # a CSV saved by Excel starts with a byte-order mark
    except OSError as exc:
        raise ConfigError(f"awards file {file}: cannot be read ({exc.strerror or exc})") from exc
    if file.suffix.lower() == ".toml":
        try:
            tables = tomllib.loads(text).get("award", [])
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"awards file {file}: not TOML ({exc})") from exc
        if not isinstance(tables, list):
            raise ConfigError(f"awards file {file}: expected [[award]] tables")
        awards = [_award(t, f"awards file {file}, award {i}") for i, t in enumerate(tables, start=1)]
    else:
        reader = csv.DictReader(text.splitlines())
        absent = [f for f in _FIELDS if f not in (reader.fieldnames or [])]
        if absent:
            wanted = ",".join(_FIELDS)
            raise ConfigError(f"awards file {file}: the header lacks {', '.join(absent)} (expected {wanted})")
        awards = [
            _award(row, f"awards file {file} line {number}")
            for number, row in enumerate(reader, start=2)
            if any((v or "").strip() for v in row.values() if isinstance(v, str))
        ]
    seen: set[tuple[str, str, date, date]] = set()
    for a in awards:
        key = (a.project, a.resource, a.first, a.last)
        if key in seen:
            raise ConfigError(
                f"awards file {file}: {a.project} has two {a.resource} awards for {a.first} to {a.last}: give one"
            )
        seen.add(key)
    return awards
