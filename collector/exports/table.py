"""The table an allocation committee gets: usage per project, user, site and month (any of the
summary dimensions), summed in the store from the daily summaries, or from the raw records.

Both roads end in the same columns (see :data:`collector.summaries.spec.COLUMNS` for units):
jobs, wall, core, GPU, memory and CPU hours; held and billed resource-hours and the rate paid
over what was held; penalty usage beside CPU-only usage and each one's share of the pool;
true overhead CU-hours (with and without fitting idle demand) where the rows are per site.

A sum that is no number (it overflowed: records stored before collectors bounded their numbers,
:data:`collector.schema.MAX_MAGNITUDE`) is never written as a number: the table is refused,
naming the group and the column, rather than handed to a committee with ``inf`` in it, or
worse, a share of 0 beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import numpy as np
import pandas as pd

from collector.errors import ConfigError, SinkError
from collector.records import SUMMARY_DIMENSIONS
from collector.sinks.base import Aggregation, PeriodUnit, Sink, Total
from collector.summaries.spec import COLUMNS, EXPORTED, SOURCES

__all__ = ["AUDIT_SHEET", "BY_CHOICES", "Period", "audit_table", "usage_table"]

# the summary dimensions, and those of fairacct's own kinds beyond them (the submitter)
BY_CHOICES = (
    *SUMMARY_DIMENSIONS,
    *dict.fromkeys(d for k in EXPORTED for d in SOURCES[k].dimensions if d not in SUMMARY_DIMENSIONS),
    "month",
    "day",
)
SUMMED = [t for k in EXPORTED for t in SOURCES[k].totals]
COUNTS = [t.name for t in SUMMED if not t.fields]


@dataclass(frozen=True)
class Period:
    """Whole UTC days ``first`` .. ``last`` (both included)."""

    first: date
    last: date

    def __post_init__(self) -> None:
        if self.last < self.first:
            raise ConfigError(f"--to ({self.last}) is before --from ({self.first})")

    @property
    def since(self) -> str:
        return f"{self.first}T00:00:00Z"

    @property
    def until(self) -> str:
        return f"{self.last + timedelta(days=1)}T00:00:00Z"


def _split_by(by: Sequence[str]) -> tuple[PeriodUnit | None, list[str]]:
    wrong = [b for b in by if b not in BY_CHOICES]
    if wrong:
        raise ConfigError(f"--by: expected some of {', '.join(BY_CHOICES)}, got {', '.join(map(repr, wrong))}")
    if "month" in by and "day" in by:
        raise ConfigError("--by: give month or day, not both")
    period: PeriodUnit | None = "month" if "month" in by else "day" if "day" in by else None
    return period, [b for b in by if b not in ("month", "day")]


def usage_table(sink: Sink, period: Period, by: Sequence[str], *, raw: bool = False) -> pd.DataFrame:
    """One row per group of ``by`` (dimensions, and ``month`` or ``day``) over ``period``, summed
    in the store from the ``summary`` records (or, with ``raw``, from the job, allocation and slot
    records themselves), with the derived rates and shares (see the module docstring)."""
    when, dims = _split_by(by)
    keys = (["period"] if when else []) + dims
    if raw:
        frames = []
        for source in (SOURCES[k] for k in EXPORTED):
            grouped = tuple(d for d in dims if d in source.dimensions)
            rows = sink.aggregate(Aggregation(source.kind, grouped, source.totals, when, period.since, period.until))
            named = [*(["period"] if when else []), *grouped]
            frames.append(_all_numbers(pd.DataFrame(rows, columns=[*named, *(t.name for t in source.totals)]), named))
        table = pd.concat([f.reindex(columns=[*keys, *(t.name for t in SUMMED)]) for f in frames], ignore_index=True)
    else:
        totals = tuple(Total(t.name, (t.name,)) for t in SUMMED)
        rows = sink.aggregate(Aggregation("summary", tuple(dims), totals, when, period.since, period.until))
        table = _all_numbers(pd.DataFrame(rows, columns=[*keys, *(t.name for t in SUMMED)]), keys)
    table[keys] = table[keys].astype(object).where(table[keys].notna(), None)
    sums = [t.name for t in SUMMED]
    # a group seen by several source kinds is one row; a missing dimension is its own group
    table = (
        table.fillna({s: 0.0 for s in sums}).groupby(keys, dropna=False, sort=False)[sums].sum().reset_index()
        if keys
        else table[sums].sum().to_frame().T
    )
    table[COUNTS] = table[COUNTS].round().astype(np.int64)
    if keys:  # a group only summaries of other kinds (the books, Gratia's) fall in counts nothing here
        table = table[(table[COUNTS] > 0).any(axis=1)].reset_index(drop=True)
    table = _derived(table, "period" if when else None)
    if when:
        table = table.rename(columns={"period": when})
    order = ([when] if when else []) + dims
    return (
        table.sort_values(order, na_position="last", key=lambda c: c.astype(str)).reset_index(drop=True)
        if order
        else table
    )


def _all_numbers(table: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """``table`` (the store's sums, by ``keys``), or a :class:`SinkError` naming its first groups
    whose sums are no number (see the module docstring): infinite, or NaN where a store divided
    one by another (Elasticsearch's weighted average of a product), before anything fills a gap."""
    sums = [c for c in table.columns if c not in keys]
    broken = ~np.isfinite(table[sums].to_numpy(dtype=float))
    if not broken.any():
        return table
    rows = np.flatnonzero(broken.any(axis=1))
    named = []
    for i in rows[:3]:
        group = ", ".join(f"{k} {table[k].iloc[i]}" for k in keys) or "the whole range"
        named.append(f"{group}: {', '.join(s for s, bad in zip(sums, broken[i], strict=True) if bad)}")
    raise SinkError(
        f"{len(rows)} group(s) sum past what a number holds ({'; '.join(named)}{'; ...' if len(rows) > 3 else ''}): "
        "a record holds a value too large to sum (stored before collectors took numbers of magnitude at most 2^63, "
        "or otherwise); nothing was written. Correct or delete those records"
    )


def _derived(table: pd.DataFrame, period: str | None) -> pd.DataFrame:
    """The rates and shares; a share is of the pool in the same period (month or day) when
    the rows are per period, of the whole range otherwise."""

    def ratio(a: pd.Series, b: pd.Series) -> pd.Series:
        return (a / b.where(b > 0)).astype(float)

    out = table.copy()
    out["billed_over_held"] = ratio(out["billed_core_hours"], out["held_core_hours"])
    for name, share in (("penalty_hours", "penalty_share"), ("cpu_only_hours", "cpu_only_share")):
        total = out.groupby(period)[name].transform("sum") if period else pd.Series(out[name].sum(), index=out.index)
        out[share] = (100.0 * ratio(out[name], total)).fillna(0.0)
    out["penalty_over_cpu_only"] = ratio(out["penalty_hours"], out["cpu_only_hours"])
    first = [c for c in out.columns if c not in _ORDER]
    return out[first + [c for c in _ORDER if c in out.columns]]


_ORDER = [
    "n_jobs", "walltime_hours", "core_hours", "gpu_hours", "memory_gib_hours", "cpu_hours",
    "n_bills", "held_core_hours", "billed_core_hours", "billed_over_held", "held_memory_gib_hours",
    "billed_memory_gib_hours", "held_gpu_hours", "billed_gpu_hours",
    "penalty_hours", "cpu_only_hours", "penalty_share", "cpu_only_share", "penalty_over_cpu_only",
    "n_slot_snapshots", "slot_core_hours", "overhead_cu_hours", "overhead_cu_hours_fitting_idle",
]  # fmt: skip


AUDIT_SHEET = (
    "audit_jobs", "audit_held_core_hours", "audit_claimed_core_hours", "audit_used_core_hours",
    "audit_difference_core_hours", "audit_bound_core_hours",
)  # fmt: skip
"""The sums of the daily ``audit`` summaries an export's ``audit`` sheet shows, per day, submitter and site."""


def audit_table(sink: Sink, period: Period, *, reach_s: float | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """The books of each day of ``period`` (the ``audit`` summaries, summed in the store: one
    per day, submitter and site), and what each column means. ``audit_beyond``: 1 where the
    day's difference is beyond the sampling bound. With ``reach_s`` (the probe's
    ``pool.max_interval_s``), the core-hours of the jobs still running are set apart in
    ``audit_open_core_hours`` as the report sets them apart (:func:`_running_set_apart`)."""
    totals = (
        *(Total(c, (c,)) for c in AUDIT_SHEET),
        Total("audit_beyond", where="audit_beyond"),
    )
    query = Aggregation("summary", ("submitter", "site"), totals, "day", period.since, period.until, ("audit_jobs",))
    names = ["day", "submitter", "site", *(t.name for t in totals)]
    rows = [dict(r, day=r["period"]) for r in sink.aggregate(query)]
    table = pd.DataFrame(rows, columns=names)
    table = table.sort_values(["day", "submitter", "site"], key=lambda c: c.astype(str)).reset_index(drop=True)
    meanings = {"day": "The day (UTC) of the books.", "submitter": COLUMNS["submitter"].help}
    meanings |= {"site": COLUMNS["site"].help, **{t.name: COLUMNS[t.name].help for t in totals}}
    if reach_s is not None and len(table):
        table = _running_set_apart(sink, table, reach_s)
        meanings["audit_open_core_hours"] = (
            "Audit: core-hours held by jobs still running at their pool's newest snapshot (not in the history yet), "
            "set apart from audit_held_core_hours and not compared: a job is in the history once it has left the queue."
        )
        meanings = {c: meanings[c] for c in table.columns}
    return table, meanings


def _running_set_apart(sink: Sink, table: pd.DataFrame, reach_s: float) -> pd.DataFrame:
    """``table`` (:func:`audit_table`'s) with each day's jobs still running set apart
    (:func:`collector.books.set_open_apart`), its difference and ``audit_beyond`` again. The
    daily summaries cannot do it: when a day is summarized its running jobs' end is not known, and
    a job that ends later is then in the history; an export reads the store as it is now."""
    from collector.books import set_open_apart
    from collector.summaries.audit import open_held, running_jobs

    books = table.rename(columns=lambda c: c.removeprefix("audit_"))
    running = running_jobs(sink, reach_s=reach_s)  # once: the same jobs for every day
    days = []
    for day, rows in books.groupby("day", sort=False):
        start = datetime.fromisoformat(f"{str(day)[:10]}T00:00:00+00:00").timestamp()
        opened = open_held(sink, start, start + 86400.0, reach_s=reach_s, running=running)
        days.append(set_open_apart(rows.reset_index(drop=True), opened))
    out = pd.concat(days, ignore_index=True)
    out["beyond"] = out["beyond"].astype(int)
    held = list(out.columns).index("held_core_hours") + 1
    order = [*out.columns[:held], "open_core_hours", *[c for c in out.columns[held:] if c != "open_core_hours"]]
    return out[order].rename(columns=lambda c: c if c in ("day", "submitter", "site") else f"audit_{c}")
