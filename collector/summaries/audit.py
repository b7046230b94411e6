"""The submitters' books of a window, asked of the store, and the daily ``audit`` and ``gap``
summaries made of them (:mod:`collector.books` has the math and the sampling bound).

Everything is summed in the store (:meth:`~collector.sinks.base.Sink.aggregate`: one SQL
``GROUP BY`` in the embedded store, composite aggregations in Elasticsearch/OpenSearch); what
comes back is a row per snapshot (for the gaps) and per submitter and site:

- the snapshots: slot records by pool, ``observed_at`` and ``interval_s``, observed from the
  window's start to ``reach_s`` (the longest time a snapshot may stand for) past its end;
- held: allocation records observed in the window, ``cpus x interval_s`` by pool, submitter and
  site, with and without a job; those within ``reach_s`` after each edge also by snapshot, to
  clip them to the window;
- used: per observed segment ``[a, b)``, the job records that overlap it, in four sums (wall time
  starting before ``a`` or not, ending before ``b`` or not) of jobs, cores, cores x start and
  cores x end, which give each job's ``cpus x (min(end, b) - max(start, a))`` summed without a
  job coming back. A job's wall time is ``[ran_from, ran_to]`` (every run, laid end to end before
  its last run ended: :mod:`collector.books`), asked for by ``ranges`` on those fields; a record
  written before them counts ``[start, end]`` (``ranges`` on ``start`` and the record's time):
  all records' sums less those of the records with ``ran_from``, as no store can ask for the
  records that lack a field. With the jobs also the sum of cores x runs (the bound), each job
  once at the first segment it overlaps, and per edge of an observed segment the cores x
  ``earlier_s`` of the jobs whose earlier runs it cuts; the same sums over the gaps of the window
  name what ran there, per submitter and site.

A day's books are written as summary records (:func:`audit_docs`): one ``audit`` record per
submitter and site (``record_kind`` ``audit``) and one ``gap`` record per pool with gaps, keyed
like every summary by the day and their dimensions, so that re-summarizing a day replaces them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import pandas as pd

from collector.books import (
    KEYS,
    gaps,
    held_core_seconds,
    holes,
    job_core_seconds,
    observed_segments,
    submitter_books,
    unobserved_only,
)
from collector.records import iso_utc
from collector.sinks.base import Aggregation, Sink, Total

__all__ = [
    "AUDIT_COLUMNS",
    "DEFAULT_LAG_S",
    "DEFAULT_REACH_S",
    "GAP_COLUMNS",
    "SubmitterBooks",
    "audit_rows",
    "day_books",
    "longest_job_s",
    "open_held",
    "running_jobs",
    "submitter_audit",
]

DEFAULT_LAG_S = 2.0
"""Seconds the pool may add at each end of a job (see :mod:`collector.books`): the collector's
lag behind a startd, measured at most 1.3 s on the real pool's churn
(the live churn test of the source tree), and the moment between a claim and its job's start."""

DEFAULT_REACH_S = 900.0
"""The longest time one snapshot may stand for when nothing says otherwise: the probe's default
``pool.max_interval_s`` (a snapshot observed after a window reaches into it by at most this)."""

AUDIT_COLUMNS = (
    "jobs", "held_core_hours", "claimed_core_hours", "used_core_hours", "difference_core_hours",
    "bound_core_hours", "beyond",
)  # fmt: skip
"""What an ``audit`` summary holds of its submitter and site's books (besides ``interval_s`` and
``lag_s``), each as ``audit_<column>``: prefixed, so that a sum over all summaries (an export, a
dashboard) never adds the books' held core-hours into the allocation summaries' own."""

GAP_COLUMNS = ("n_gaps", "gap_seconds")
"""What a ``gap`` summary holds of its pool's gaps in the day."""


@dataclass(frozen=True)
class SubmitterBooks:
    """The submitters' books of ``[start, end)`` (UNIX seconds): per submitter and site
    (``submitters``, :func:`collector.books.submitter_books`), the ``gaps`` per pool, the
    longest snapshot interval ``interval_s`` (0: no snapshot) and the ``lag_s`` the bound allows."""

    start: float
    end: float
    interval_s: float
    lag_s: float
    submitters: pd.DataFrame
    gaps: pd.DataFrame
    snapshots: int

    @property
    def beyond(self) -> int:
        """Submitter and site rows whose difference is beyond the sampling bound."""
        return int(self.submitters["beyond"].sum())


def _frame(rows: list[dict[str, Any]], query: Aggregation) -> pd.DataFrame:
    columns = list(query.group_by) + [t.name for t in query.totals]
    return pd.DataFrame(rows, columns=columns)


def _sum(sink: Sink, query: Aggregation) -> pd.DataFrame:
    return _frame(sink.aggregate(query), query)


def _iso(seconds: float) -> str:
    text = iso_utc([seconds])[0]
    assert text is not None  # a window is after the epoch (checked by the callers)
    return text


def submitter_audit(
    sink: Sink, start: float, end: float, *, reach_s: float, lag_s: float, longest_s: float | None = None
) -> SubmitterBooks:
    """The submitters' books of ``[start, end)`` (whole UNIX seconds) from the records in
    ``sink``; ``reach_s``: the longest time a snapshot may stand for (seconds). ``longest_s``:
    the longest a job's last run may be (seconds; None: any), so that the jobs that end after
    a segment are looked for only up to that long after it, not through the rest of the store."""
    since, until, after = _iso(start), _iso(end), _iso(end + reach_s)

    snaps = _sum(
        sink,
        Aggregation("slot", ("pool", "observed_at", "interval_s"), (Total("slots"),), None, since, after),
    )
    snaps = snaps.dropna(subset=["observed_at", "interval_s"])
    interval = float(pd.to_numeric(snaps["interval_s"]).max()) if len(snaps) else 0.0

    with_job, every = _held(sink, start, end, reach_s, ("job_id",)), _held(sink, start, end, reach_s, ())

    segments = observed_segments(snaps, start, end)
    used = _ran_in(sink, segments, longest_s)
    unobserved = _ran_in(sink, holes(segments, start, end), longest_s) if len(snaps) else None
    late = None
    if interval > 0:  # with no snapshot, no sample after the window stands for time in it
        late = _sum(
            sink,
            Aggregation("job", ("submitter", "site"), _JOB_TOTALS, None, until,
                        _iso_or_none(_after(end + interval, longest_s)), ranges=(("start", end, end + interval),)),
        )  # fmt: skip
    return SubmitterBooks(
        start=start,
        end=end,
        interval_s=interval,
        lag_s=lag_s,
        submitters=submitter_books(
            with_job,
            every,
            used,
            interval_s=interval,
            lag_s=lag_s,
            late=late,
            unplaced=_unplaced(sink, segments),
            unobserved=unobserved,
        ),
        gaps=gaps(snaps[snaps["observed_at"].astype(float) - snaps["interval_s"].astype(float) < end], start, end),
        snapshots=len(snaps),
    )


def _held(
    sink: Sink, start: float, end: float, reach_s: float, requires: tuple[str, ...], keys: tuple[str, ...] = KEYS
) -> pd.DataFrame:
    """Core-seconds the allocation records (those with every field of ``requires``) hold inside
    ``[start, end)``, by ``keys`` (:func:`collector.books.held_core_seconds`)."""
    since, until, after = _iso(start), _iso(end), _iso(end + reach_s)
    bulk = _sum(
        sink, Aggregation("allocation", keys, (Total("core_s", ("cpus", "interval_s")),), None, since, until, requires)
    )
    edge = (*keys, "observed_at", "interval_s")
    edges = pd.concat(
        [
            _sum(sink, Aggregation("allocation", edge, (Total("cpus", ("cpus",)),), None, a, b, requires))
            for a, b in ((since, _iso(start + reach_s)), (until, after))
        ],
        ignore_index=True,
    ).drop_duplicates(subset=list(edge))
    return held_core_seconds(bulk, edges, start, end, keys)


def open_held(
    sink: Sink, start: float, end: float, *, reach_s: float, running: set[tuple[object, object]] | None = None
) -> pd.DataFrame:
    """Core-seconds held inside ``[start, end)`` (UNIX seconds) by the jobs still running
    (:func:`running_jobs`, or ``running`` as it gave them for several windows), per ``pool``,
    ``submitter``, ``site`` and ``job_id`` (:func:`collector.books.set_open_apart` sets them
    apart). Empty when no such job ran in the window. The window's allocation records are summed
    per job here, once: for a report or an audit, not for every day of the daily summaries."""
    columns = ["pool", "submitter", "site", "job_id", "core_s"]
    running = running_jobs(sink, reach_s=reach_s) if running is None else running
    if not running:
        return pd.DataFrame(columns=columns)
    held = _held(sink, start, end, reach_s, ("job_id",), (*KEYS, "job_id"))
    still = [(p, j) in running for p, j in held[["pool", "job_id"]].itertuples(index=False)]
    return held.loc[still, columns].reset_index(drop=True)


def running_jobs(sink: Sink, *, reach_s: float) -> set[tuple[object, object]]:
    """``(pool, job_id)`` of the jobs still running: those whose allocation records are in their
    pool's newest snapshot in the store (however long after a window: a job may run for days) and
    that have no job record ending after ``reach_s`` before that snapshot (the history holds a job
    once it has left the queue)."""
    newest = _sum(sink, Aggregation("slot", ("pool",), (Total("last", ("observed_at",), op="max"),), None))
    running: set[tuple[object, object]] = set()
    for pool, last in newest[["pool", "last"]].itertuples(index=False):
        if last is None or last != last:
            continue
        seen = _sum(
            sink,
            Aggregation("allocation", ("pool", "job_id"), (Total("records"),), None, _iso(float(last)),
                        _iso(float(last) + 1.0), ("job_id",)),
        )  # fmt: skip
        running |= {(p, j) for p, j in seen[["pool", "job_id"]].itertuples(index=False) if p == pool}
    if not running:
        return running
    since = _iso(min(float(t) for t in newest["last"].dropna()) - reach_s)
    done = _sum(sink, Aggregation("job", ("job_id",), (Total("jobs"),), None, since, None))
    finished = set(done["job_id"].tolist())
    return {(p, j) for p, j in running if j not in finished}


_JOB_TOTALS = (
    Total("jobs"),
    Total("cores", ("cpus",)),
    Total("cores_start", ("cpus", "start")),
    Total("cores_end", ("cpus", "end")),
)
_RUN_TOTALS = (
    Total("jobs"),
    Total("cores", ("cpus",)),
    Total("cores_start", ("cpus", "ran_from")),
    Total("cores_end", ("cpus", "ran_to")),
    Total("core_runs", ("cpus", "runs")),
    Total("runs", ("runs",)),
)
_SETTLE_S = 60.0
"""How long before its record's time (its completion or removal, in whole seconds) a job's wall
time may end: the last run's end is its start plus its wall time, both rounded to the second."""


def _used_parts(
    sink: Sink, a: float, b: float, longest_s: float | None
) -> list[tuple[pd.DataFrame, float, float, bool, bool]]:
    """The sums :func:`collector.books.job_core_seconds` takes for the segment ``[a, b)``: per
    class (the wall time starts before ``a`` or not, ends at or after ``b`` or not), the records
    with ``ran_from``/``ran_to`` summed over those, plus the older records over ``start``/``end``
    (all records' sums less those of the records that have ``ran_from``: a store cannot ask for
    the records that lack a field)."""
    parts = []
    for start_clipped in (False, True):
        for end_clipped in (False, True):
            starts = (None, a) if start_clipped else (a, b)
            ends: tuple[float | None, float | None] = (b, _after(b, longest_s)) if end_clipped else (a, b)
            # the record's time is its end in whole seconds: the end itself is asked for
            # (read from each record) only where a segment's edge falls inside a second
            exact = () if all(e is None or e.is_integer() for e in ends) else (("end", *ends),)
            old_style = Aggregation(
                "job", ("submitter", "site"), _JOB_TOTALS, None, _iso_or_none(ends[0]), _iso_or_none(ends[1]),
                ranges=(("start", *starts), *exact),
            )  # fmt: skip
            with_runs = dataclasses.replace(old_style, requires=("ran_from",))
            older = _less(_sum(sink, old_style), _sum(sink, with_runs))
            older = older.assign(core_runs=older["cores"], runs=older["jobs"])  # one run each, as before
            # a job's wall time ends at ran_to, up to _SETTLE_S before its record's time and
            # any time before (held, then removed weeks later): no upper bound on that time
            ran = Aggregation(
                "job", ("submitter", "site"), _RUN_TOTALS, None, _iso((b if end_clipped else a) - _SETTLE_S), None,
                ranges=(("ran_from", *starts), ("ran_to", *ends)),
            )  # fmt: skip
            rows = pd.concat([older, _sum(sink, ran)], ignore_index=True)
            parts.append((rows, a, b, start_clipped, end_clipped))
    return parts


def _ran_in(sink: Sink, intervals: pd.DataFrame, longest_s: float | None) -> pd.DataFrame:
    """What the job records say ran inside ``intervals`` (``start``, ``end``: in order,
    disjoint), per submitter and site (:func:`collector.books.job_core_seconds`), each job's
    runs counted once however many of them its wall time overlaps (:func:`_counted_once`)."""
    spans = list(zip(intervals["start"].tolist(), intervals["end"].tolist(), strict=True))
    parts = [part for a, b in spans for part in _used_parts(sink, a, b, longest_s)]
    return job_core_seconds(parts, _counted_once(sink, spans, longest_s))


def _counted_once(sink: Sink, spans: list[tuple[float, float]], longest_s: float | None) -> pd.DataFrame:
    """``jobs``, ``cores``, ``core_runs`` and ``runs`` per submitter and site of the jobs whose
    wall time overlaps one of ``spans`` (``[a, b)``, in order, disjoint), each job once: at the
    first span it overlaps, the one its wall time starts before the end of, and after the end
    of the span before (a job that overlaps spans k and k + 1 starts before the end of k). A
    run is one job's one run on both sides of a gap, not one a segment."""
    frames = []
    previous: float | None = None
    for a, b in spans:
        starts = (previous, b)
        ran = Aggregation(
            "job", ("submitter", "site"), _RUN_TOTALS, None, _iso(a - _SETTLE_S), None,
            ranges=(("ran_from", *starts), ("ran_to", a, None)),
        )  # fmt: skip
        exact = () if a.is_integer() else (("end", a, None),)
        old_style = Aggregation(
            "job", ("submitter", "site"), _JOB_TOTALS, None, _iso(math.floor(a)), _iso_or_none(_after(b, longest_s)),
            ranges=(("start", *starts), *exact),
        )  # fmt: skip
        older = _less(_sum(sink, old_style), _sum(sink, dataclasses.replace(old_style, requires=("ran_from",))))
        frames += [older.assign(core_runs=older["cores"], runs=older["jobs"]), _sum(sink, ran)]
        previous = b
    columns = ["submitter", "site", "jobs", "cores", "core_runs", "runs"]
    return pd.concat([f[columns] for f in frames], ignore_index=True) if frames else pd.DataFrame(columns=columns)


def _less(rows: pd.DataFrame, minus: pd.DataFrame) -> pd.DataFrame:
    """``rows``' sums less ``minus``'s, per submitter and site (groups of ``rows`` only)."""
    keys = ["submitter", "site"]
    values = [c for c in rows.columns if c not in keys]
    if not len(minus):
        return rows
    both = pd.concat([rows, minus.assign(**{c: -pd.to_numeric(minus[c]) for c in values})], ignore_index=True)
    out = both.groupby(keys, dropna=False, sort=False)[values].sum().reset_index()
    return out[(out["jobs"] != 0)].reset_index(drop=True)


def _unplaced(sink: Sink, segments: pd.DataFrame) -> pd.DataFrame:
    """cpus x ``earlier_s`` per submitter and site of the jobs whose earlier runs' span
    ``(first_start, start)`` holds an edge of an observed segment: where in it they ran is not
    known, so what of them the window holds is not either. Each job counts once, at the first
    edge inside its span (``first_start`` at or after the edge before)."""
    edges = sorted({float(t) for t in (*segments["start"].tolist(), *segments["end"].tolist())})
    frames = []
    previous: float | None = None
    for x in edges:
        query = Aggregation(
            "job", ("submitter", "site"), (Total("core_s", ("cpus", "earlier_s")),), None, _iso(x - _SETTLE_S),
            None, ranges=(("first_start", previous, x), ("start", x, None), ("earlier_s", 1e-9, None)),
        )  # fmt: skip
        frames.append(_sum(sink, query))
        previous = x
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["submitter", "site", "core_s"])


def _after(t: float, longest_s: float | None) -> float | None:
    """The end (exclusive, whole seconds) of the jobs that started before ``t`` (None: any)."""
    return None if longest_s is None else float(math.floor(t + longest_s)) + 1.0


def _iso_or_none(t: float | None) -> str | None:
    return None if t is None else _iso(t)


def longest_job_s(sink: Sink, since: str) -> float:
    """The longest wall time (seconds) of the job records that end at or after ``since``
    (ISO-8601; 0 when none), with a day to spare: the longest a job's last run may be.
    ``walltime_s`` is HTCondor's ``RemoteWallClockTime``, every run of the job, the last one
    included; the day covers a record whose wall time is missing or short of its last run's."""
    query = Aggregation("job", ("pool",), (Total("longest", ("walltime_s",), op="max"),), None, since, None)
    found = [float(r["longest"]) for r in sink.aggregate(query) if r["longest"] is not None]
    return max(found, default=0.0) + 86400.0


def day_books(sink: Sink, day: date, *, reach_s: float, lag_s: float, longest_s: float | None = None) -> SubmitterBooks:
    """The submitters' books of one UTC day (``longest_s`` as :func:`submitter_audit` takes it)."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    return submitter_audit(sink, start, start + 86400.0, reach_s=reach_s, lag_s=lag_s, longest_s=longest_s)


def audit_rows(books: SubmitterBooks, period: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the ``audit`` and ``gap`` summaries of a day's ``books`` (``period``:
    YYYY-MM-DD), as :func:`collector.summaries.run.summary_docs` takes them. A day no snapshot
    observed (no probe wrote slot records for it) has no books to show: no rows."""
    if not books.snapshots:
        return [], []
    subs = books.submitters[~unobserved_only(books.submitters)]  # a loss in the gaps alone compares nothing
    audit = [
        {
            "period": period,
            "site": site,
            "submitter": submitter,
            **{f"audit_{c}": _plain(v) for c, v in zip(AUDIT_COLUMNS, values, strict=True)},
            "audit_interval_s": books.interval_s,
            "audit_lag_s": books.lag_s,
        }
        for site, submitter, *values in subs[["site", "submitter", *AUDIT_COLUMNS]].itertuples(index=False)
    ]
    per_pool = books.gaps.groupby("pool", dropna=False, sort=True)["seconds"].agg(["size", "sum"])
    gap = [
        {"period": period, "pool": None if pool != pool else pool, "n_gaps": int(n), "gap_seconds": float(s)}
        for pool, (n, s) in zip(per_pool.index, per_pool.to_numpy().tolist(), strict=True)
    ]
    return audit, gap


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value a record holds (``beyond`` a bool, ``jobs`` an int)."""
    return value.item() if hasattr(value, "item") else value
