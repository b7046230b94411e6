"""Whether the daily summaries an export sums count every record of their days.

The services re-summarize only the last days (the collector's ``summaries_nightly_days``, 365 by
default, as GRACC's summarizer; a probe's ``[summaries]``): the summaries' *horizon*. A day
before it keeps the summaries made while it was within, or none when its records came later (a
backfill, a store filled from another, a collector that ran for less than the range): an export
of summaries that sums across the horizon counts such a day short, and nothing in the sums
shows it (jobs older than the horizon beside recent ones: 10 jobs in the export, 20 in the
records). So the days of a range before the horizon are checked, before anything is written: a
day whose summaries count fewer (or more) records of a kind than the store holds for that day
is :class:`Uncovered`. Days within the horizon are not: a service re-makes them every few
minutes (``summaries_every_s``) or every night, and a summary behind its newest records there is
the cadence's lag, not a day left behind.

Records are counted as the summaries count them: per day of their ``timestamp`` (UTC), the
groups whose ``timestamp`` names no day left out on both sides (:func:`~collector.summaries.run.dated_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from collector.exports.table import Period
from collector.sinks.base import Aggregation, Sink, Total
from collector.summaries.run import dated_rows
from collector.summaries.spec import EXPORTED, SOURCES

__all__ = ["COUNTED", "Uncovered", "uncovered_days"]

COUNTED = {kind: next(t.name for t in SOURCES[kind].totals if not t.fields) for kind in EXPORTED}
"""The sum of each exported kind's summaries that counts its records (``n_jobs`` of jobs, ...)."""


@dataclass(frozen=True)
class Uncovered:
    """A day whose summaries of ``kind`` count ``summarized`` records where the store holds ``records``."""

    day: date
    kind: str
    records: int
    summarized: int

    def __str__(self) -> str:
        return f"{self.day}: {self.records} {self.kind} records, {self.summarized} summarized"


def uncovered_days(sink: Sink, period: Period, *, horizon: date) -> list[Uncovered]:
    """The days of ``period`` before ``horizon`` (the first day the services still re-summarize)
    whose summaries do not count their records, by day then kind (see the module docstring):
    one aggregation of the summaries and one of each exported kind, by day, in the store."""
    last = min(period.last, horizon - timedelta(days=1))
    if last < period.first:
        return []
    since, until = period.since, f"{last + timedelta(days=1)}T00:00:00Z"
    totals = tuple(Total(name, (name,)) for name in COUNTED.values())
    summaries, _ = dated_rows(sink.aggregate(Aggregation("summary", (), totals, "day", since, until)))
    summarized = {(r["period"], kind): round(r[name] or 0) for r in summaries for kind, name in COUNTED.items()}
    found = []
    for kind in EXPORTED:
        rows, _ = dated_rows(sink.aggregate(Aggregation(kind, (), (Total("records"),), "day", since, until)))
        held = {r["period"]: int(r["records"]) for r in rows}
        days = held.keys() | {d for d, k in summarized if k == kind and summarized[d, k]}
        found += [
            Uncovered(date.fromisoformat(d), kind, held.get(d, 0), summarized.get((d, kind), 0))
            for d in days
            if held.get(d, 0) != summarized.get((d, kind), 0)
        ]
    return sorted(found, key=lambda u: (u.day, EXPORTED.index(u.kind)))
