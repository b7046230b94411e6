"""Summarizing days: the store sums each source kind by day (:meth:`Sink.aggregate`), and the
sums are written back as ``summary`` records whose ids come from the day, the source kind and
the dimensions, so re-summarizing a day overwrites it in place (late records are counted by
summarizing again; GRACC re-summarizes the last days on a cadence for the same reason). The
summaries of those days that were not rewritten are then deleted (:meth:`Sink.delete_stale`):
a group whose records were deleted or corrected away leaves no summary behind.

The kind ``audit`` (:data:`AUDIT`) is not a sum of one record kind: it is each day's books
balance (:mod:`collector.summaries.audit`), written as ``audit`` summaries per submitter and
site and ``gap`` summaries per pool, keyed, replaced and deleted as the others are.

Several writers may share one store (collectors behind a load balancer, each summarizing on its
cadence, and ``fairacct summarize``). Two runs at once would undo each other: a run sums what
the store holds when it reads, and deletes the summaries it did not make, so one that read
before the other wrote deletes, as stale, the groups the other found since, and writes its
older sums over the other's. So a run holds the store's lease :data:`LEASE` (taken before it
reads, renewed at every step, let go at the end, :meth:`Sink.take_lease`): runs take turns,
and one that finds the lease another's raises :class:`~collector.errors.BusyError` before it
reads anything. Its summaries carry the lease's token as their version, and it deletes only
summaries of a lower version: should a run outlive its lease (a process paused longer than
:data:`LEASE_S`), the store keeps what a later holder wrote, whatever the paused run writes or
deletes after.

A sum that is no number (past 1.8e308: it overflowed) is never written: JSON has no infinity,
so the embedded store would keep it as null, which exports read as 0, and Elasticsearch refuses
it. A collector takes no number of magnitude over 2^63 (:data:`collector.schema.MAX_MAGNITUDE`),
within which no sum overflows, but a store may hold records from before, or written otherwise.
Such a group's summary is left as it was (an earlier one is kept, not deleted as stale), the
other groups' are written, and the run then raises :class:`SinkError` naming the groups: the
collector's /healthz says the run failed, ``fairacct summarize`` exits 1.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from collector.errors import BusyError, FairacctError, SinkError
from collector.records import SCHEMA_VERSION, SUMMARY_DIMENSIONS, VERSION, encode_docs, record_id
from collector.sinks.base import Aggregation, Lease, Sink, Total
from collector.summaries.audit import DEFAULT_LAG_S, DEFAULT_REACH_S, audit_rows, day_books, longest_job_s
from collector.summaries.spec import AUDIT, AUDIT_DIMENSIONS, SOURCES, Source

__all__ = [
    "KINDS",
    "LEASE",
    "LEASE_S",
    "Progress",
    "Summarized",
    "dated_rows",
    "day_range",
    "last_days",
    "source_rows",
    "steps",
    "summarize",
    "summary_docs",
]

KINDS = (*SOURCES, AUDIT)
"""What :func:`summarize` summarizes unless told otherwise: every source kind, then the books."""

Progress = Callable[[int], None]
"""Told how many more steps (one per source kind and chunk of days) are done."""

LEASE = "summaries"
"""The name of the lease a summary run holds in its store (see the module docstring)."""

LEASE_S = 300.0
"""How long a summary run's lease lasts unless renewed (it is, at every step: a step of a big
store takes seconds); a writer that died holding it holds up the others' runs that long."""


@dataclass
class Summarized:
    """What a run wrote: summary records per source kind, the stale ones it deleted, and the days it covered."""

    first: date
    last: date
    token: int  # of the lease the run holds (the last, if it ran out and was taken again): its summaries' version
    records: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    undated: dict[str, int] = field(default_factory=dict)  # groups of records whose timestamp names no day
    overflowed: list[str] = field(default_factory=list)  # groups whose sums are no number, not written

    @property
    def total(self) -> int:
        return sum(self.records.values())


def day_range(first: date, last: date, chunk_days: int) -> Iterator[tuple[date, date]]:
    """[first, last] (inclusive) in chunks of at most ``chunk_days`` days, as (start, end) with end exclusive."""
    start = first
    while start <= last:
        end = min(start + timedelta(days=chunk_days), last + timedelta(days=1))
        yield start, end
        start = end


def source_rows(source: Source, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of an aggregation of ``source`` as its summaries hold them: a missing dimension
    given its value, integer dimensions made integers, fallbacks taken (:class:`Source` says
    which), and the rows that these make equal merged, their sums added."""
    if not (source.missing or source.integers or source.fallbacks):
        return list(rows)
    keys = ("period", *source.dimensions)
    sums = [t.name for t in source.totals]
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for original in rows:
        row = dict(original)
        for name, value in source.missing:
            if row.get(name) is None:
                row[name] = value
        for name in source.integers:
            row[name] = _integer(row.get(name))
        for name, other, placeholders in source.fallbacks:
            value = row.get(name)
            if value is None or (isinstance(value, str) and value.lower() in placeholders):
                row[name] = row.get(other)
        key = tuple((type(row.get(k)), row.get(k)) for k in keys)  # 1 and "1" are two groups
        if key in merged:
            into = merged[key]
            for name in sums:
                into[name] += row[name]
        else:
            merged[key] = row
    return list(merged.values())


def _integer(value: Any) -> Any:
    """An integer dimension as an integer field of Elasticsearch (GRACC's raw index) indexes it:
    text that is a number coerced, its fraction cut; anything else as it is."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return int(value.strip().split(".")[0] or "0")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_NUMBER = re.compile(r"\s*[+-]?[0-9]{1,18}(?:\.[0-9]*)?\s*", re.ASCII)  # longer: over an integer field


def dated_rows(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The rows of a daily aggregation whose ``period`` is a day (``YYYY-MM-DD``), and how many
    were not. A collector stores times in one form (collector/instants.py), but a store may
    hold records from before it did (``20251231T000000Z`` once made the period
    ``20251231T0``): such a group is left out of the summaries, counted, never a crash."""
    good = [r for r in rows if _is_day(r["period"])]
    return good, len(rows) - len(good)


def _is_day(period: object) -> bool:
    if not isinstance(period, str) or _DAY.fullmatch(period) is None:
        return False
    try:
        date.fromisoformat(period)
    except ValueError:
        return False
    return True


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


def summary_docs(kind: str, rows: Sequence[dict[str, Any]], *, probe: str) -> list[dict[str, Any]]:
    """``summary`` records of the rows of a daily aggregation of ``kind`` (see the module docstring)."""
    # a source's own dimensions (Gratia's) come after the common ones in the id: the ids of
    # the other kinds stay what they were
    dimensions = SOURCES[kind].dimensions if kind in SOURCES else AUDIT_DIMENSIONS[kind]
    keyed = (*SUMMARY_DIMENSIONS, *(d for d in dimensions if d not in SUMMARY_DIMENSIONS))
    absent = dict.fromkeys(d for d in keyed if d not in dimensions)  # slots have no user
    meta = {"kind": "summary", "schema_version": SCHEMA_VERSION, "probe": probe, "record_kind": kind}
    docs = []
    days: dict[str, tuple[int, str]] = {}  # a year has 365 days and many more rows
    for row in rows:
        period = row["period"]
        if period not in days:
            day = datetime.strptime(period, "%Y-%m-%d").replace(tzinfo=UTC)
            days[period] = int(day.timestamp()), day.strftime("%Y-%m-%dT%H:%M:%SZ")
        day_s, stamp = days[period]
        doc = {
            **row,
            **absent,
            **meta,
            "timestamp": stamp,
            "day": day_s,
            "day_iso": stamp,
        }  # the row's dimensions and sums
        del doc["period"]
        doc["id"] = record_id("summary", day_s, kind, *(doc[d] for d in keyed))
        docs.append(doc)
    return docs


def summarize(
    sink: Sink,
    first: date,
    last: date,
    *,
    probe: str,
    kinds: Sequence[str] = KINDS,
    chunk_days: int = 31,
    progress: Progress | None = None,
    reach_s: float = DEFAULT_REACH_S,
    lag_s: float = DEFAULT_LAG_S,
    holder: str | None = None,
    lease_s: float = LEASE_S,
    clock: Callable[[], float] = time.time,
) -> Summarized:
    """Summarize the days ``first`` .. ``last`` (inclusive, UTC) of every kind of ``kinds`` into ``sink``.

    The aggregation runs in the store, ``chunk_days`` days per request (a step of ``progress``);
    a summary the store does not acknowledge raises :class:`SinkError` naming the day range,
    and then nothing of that range is deleted. Once a range is rewritten, its summaries of
    ``kind`` that were not are deleted (groups that no longer exist).

    The run holds the store's lease :data:`LEASE` for ``holder`` (default: ``probe`` and this
    process), ``lease_s`` seconds at a time by ``clock`` (see the module docstring); a lease
    another holds raises :class:`BusyError`, before anything is read, or at the step where
    this run finds it lost (what it wrote stays, unless a later run wrote over it).

    :data:`AUDIT` among ``kinds`` writes each day's books (``audit`` and ``gap`` summaries):
    ``reach_s`` is the longest time one snapshot may stand for (the probe's
    ``pool.max_interval_s``), ``lag_s`` what the sampling bound allows at a job's ends.
    """
    if last < first:
        raise ValueError(f"the last day ({last}) is before the first ({first})")
    holder = holder or f"{probe} (pid {os.getpid()})"
    lease = _lease(sink, holder, lease_s, clock)
    written = [k for k in kinds if k != AUDIT] + (list(AUDIT_DIMENSIONS) if AUDIT in kinds else [])
    done = Summarized(first, last, lease.token, dict.fromkeys(written, 0), dict.fromkeys(written, 0))

    def step(n: int) -> None:
        nonlocal lease
        # renewed; lost: BusyError; run out and taken again (no other took it): a new token, above
        # any other holder's meanwhile, for what is read and written from here on
        lease = _lease(sink, holder, lease_s, clock)
        done.token = lease.token
        if progress is not None:
            progress(n)

    try:
        for kind in kinds:
            if kind == AUDIT:
                _summarize_books(sink, first, last, done, probe=probe, chunk_days=chunk_days, progress=step,
                                 reach_s=reach_s, lag_s=lag_s)  # fmt: skip
                continue
            source = SOURCES[kind]
            sink.index_aggregation(Aggregation(kind, source.dimensions, source.totals, "day"))
            for start, end in day_range(first, last, chunk_days):
                since, until = f"{start}T00:00:00Z", f"{end}T00:00:00Z"
                query = Aggregation(kind, source.dimensions, source.totals, "day", since, until, source.requires)
                rows, undated = dated_rows(sink.aggregate(query))
                if undated:
                    done.undated[kind] = done.undated.get(kind, 0) + undated
                docs, kept = _written(kind, source_rows(source, rows), done, probe=probe)
                done.records[kind] += len(docs)
                done.deleted[kind] += _replace(sink, kind, docs, since, until, done.token, kept)
                step(1)
    finally:
        with contextlib.suppress(FairacctError):  # a store that failed: the lease runs out by itself
            sink.release_lease(lease)
    if done.overflowed:
        shown = "; ".join(done.overflowed[:3]) + ("; ..." if len(done.overflowed) > 3 else "")
        raise SinkError(
            f"{len(done.overflowed)} group(s) of the records of {first} .. {last} sum past what a number holds "
            f"({shown}): a record holds a value too large to sum (stored before collectors took numbers of magnitude "
            "at most 2^63, or otherwise). Their summaries were not written, an earlier one kept; the other groups' "
            "were. Correct or delete those records, then summarize those days again"
        )
    return done


def _lease(sink: Sink, holder: str, lease_s: float, clock: Callable[[], float]) -> Lease:
    """The summaries' lease taken or renewed for ``holder``; BusyError when another has it."""
    now = clock()
    lease = sink.take_lease(LEASE, holder, lease_s, now=now)
    if lease.held_by(holder, now):
        return lease
    until = datetime.fromtimestamp(lease.expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise BusyError(
        f"{sink}: {lease.holder} is making the daily summaries of this store (its lease runs until {until} "
        "unless renewed); runs are made one at a time, so this one stops here: run it again once that one is "
        "done (a collector tries again by itself a minute later)"
    )


def _written(
    kind: str, rows: Sequence[dict[str, Any]], done: Summarized, *, probe: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """The summaries of ``rows`` to write, and the ids of those not to write, nor delete: the
    groups a sum of which is no number (overflowed), each named in ``done.overflowed``."""
    good: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for row in rows:
        broken = [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)]
        (bad if broken else good).append(row)
        if broken:
            group = ", ".join(f"{d} {row[d]}" for d in (*SUMMARY_DIMENSIONS, "submitter") if row.get(d) is not None)
            done.overflowed.append(f"{kind} of {row['period']}{', ' + group if group else ''}: {', '.join(broken)}")
    return summary_docs(kind, good, probe=probe), [d["id"] for d in summary_docs(kind, bad, probe=probe)]


def _replace(
    sink: Sink, kind: str, docs: list[dict[str, Any]], since: str, until: str, version: int, kept: Sequence[str] = ()
) -> int:
    """Store the summaries ``docs`` of ``kind`` with ``version`` and delete those of [since, until)
    neither among them nor ``kept`` and of a lower version; how many were deleted. Raises
    :class:`SinkError` when the store does not take them all."""
    if docs:
        result = sink.send_encoded("summary", encode_docs("summary", docs).carrying(VERSION, version))
        failed = {**result.retry, **result.rejected}
        if failed:
            raise SinkError(
                f"{len(failed)} of {len(docs)} summaries of {kind} records from {since} to {until} "
                f"were not stored: {next(iter(failed.values()))}"
            )
    keep = [d["id"] for d in docs] + list(kept)
    return sink.delete_stale("summary", since, until, field="record_kind", value=kind, keep=keep, version=version)


def _summarize_books(
    sink: Sink,
    first: date,
    last: date,
    done: Summarized,
    *,
    probe: str,
    chunk_days: int,
    progress: Progress | None,
    reach_s: float,
    lag_s: float,
) -> None:
    """Each day's books as ``audit`` and ``gap`` summaries, ``chunk_days`` days a step."""
    for start, end in day_range(first, last, chunk_days):
        rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in AUDIT_DIMENSIONS}
        since, until = f"{start}T00:00:00Z", f"{end}T00:00:00Z"
        watched = _watched_days(sink, start, end, reach_s)
        # once a chunk: each day's jobs are looked for only that far after it
        longest = longest_job_s(sink, since) if watched else 0.0
        day = start
        while day < end:
            if day not in watched:  # no snapshot stands for any of it: no books (and no cost)
                day += timedelta(days=1)
                continue
            books = day_books(sink, day, reach_s=reach_s, lag_s=lag_s, longest_s=longest)
            audit, gap = audit_rows(books, str(day))
            rows["audit"] += audit
            rows["gap"] += gap
            day += timedelta(days=1)
        for kind, kind_rows in rows.items():
            docs, kept = _written(kind, kind_rows, done, probe=probe)
            done.deleted[kind] += _replace(sink, kind, docs, since, until, done.token, kept)
            done.records[kind] += len(docs)
        if progress is not None:
            progress(1)


def _watched_days(sink: Sink, start: date, end: date, reach_s: float) -> set[date]:
    """The days of [start, end) some snapshot may stand for part of: those with slot records,
    and the days before them within ``reach_s`` (a snapshot stands for the time before it)."""
    ahead = timedelta(days=math.ceil(reach_s / 86400.0))
    query = Aggregation("slot", ("pool",), (Total("slots"),), "day", f"{start}T00:00:00Z", f"{end + ahead}T00:00:00Z")
    seen = {date.fromisoformat(r["period"]) for r in dated_rows(sink.aggregate(query))[0]}
    return {d - timedelta(days=k) for d in seen for k in range(ahead.days + 1)}


def steps(first: date, last: date, *, kinds: Sequence[str] = KINDS, chunk_days: int = 31) -> int:
    """How many progress steps :func:`summarize` makes."""
    return len(kinds) * sum(1 for _ in day_range(first, last, chunk_days))


def last_days(now: float, days: int) -> tuple[date, date]:
    """The first and last day (UTC) of the ``days`` days up to ``now`` (UNIX seconds), today included."""
    today = datetime.fromtimestamp(now, UTC).date()
    return today - timedelta(days=days - 1), today
