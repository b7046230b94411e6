"""``fairacct audit``: the store's sums the books are made of, and the books
(:mod:`probes.accounting.audit` has the math and the sampling bound).

Everything is summed in the store (:meth:`~collector.sinks.base.Sink.aggregate`: one SQL
``GROUP BY`` in the embedded store, composite aggregations in Elasticsearch/OpenSearch); what
comes back is a row per snapshot (for the gaps), per submitter and site, and per node:

- the snapshots: slot records by pool, ``observed_at`` and ``interval_s``, observed from the
  window's start to one longest interval (``pool.max_interval_s``) past its end;
- held: allocation records observed in the window, ``cpus x interval_s`` by pool, submitter and
  site, with and without a job; those within ``pool.max_interval_s`` after each edge also by
  snapshot, to clip them to the window;
- used: per observed segment ``[a, b)``, the job records that overlap it, in four sums (start
  before ``a`` or not, end before ``b`` or not: ``ranges`` on ``start`` and the record's time,
  its ``end``) of jobs, cores, cores x start and cores x end, which give each job's
  ``cpus x (min(end, b) - max(start, a))`` summed without a job coming back;
- the nodes: slot records by node (amount x ``interval_s`` per resource), allocation records by
  ``parent``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.errors import ConfigError
from collector.records import iso_utc
from collector.sinks.base import Aggregation, Sink, Total
from probes.accounting._tables import RESOURCES
from probes.accounting.audit import (
    gaps,
    held_core_seconds,
    job_core_seconds,
    node_books,
    observed_segments,
    submitter_books,
)
from probes.config import ProbeConfig
from probes.pipeline.overhead import canonical_units

__all__ = ["AuditReport", "audit"]

DEFAULT_LAG_S = 2.0
"""Seconds the pool may add at each end of a job (see :mod:`probes.accounting.audit`): the
collector's lag behind a startd, measured at most 1.3 s on the real pool's churn
(tests/sources/test_live_churn.py), and the moment between a claim and its job's start."""


@dataclass(frozen=True)
class AuditReport:
    """The books of ``[start, end)`` (UNIX seconds): per submitter and site (``submitters``),
    per node (``nodes``), the ``gaps``, the longest snapshot interval ``interval_s`` (0: no
    snapshot) and the ``lag_s`` the bound allows."""

    start: float
    end: float
    interval_s: float
    lag_s: float
    submitters: pd.DataFrame
    nodes: pd.DataFrame
    gaps: pd.DataFrame

    @property
    def beyond(self) -> int:
        """Submitter and site rows whose difference is beyond the sampling bound."""
        return int(self.submitters["beyond"].sum())

    @property
    def unbalanced(self) -> int:
        """Nodes whose books do not balance (or allocation records naming no node)."""
        return int((~self.nodes["balanced"]).sum())


def _frame(rows: list[dict[str, Any]], query: Aggregation) -> pd.DataFrame:
    columns = list(query.group_by) + [t.name for t in query.totals]
    return pd.DataFrame(rows, columns=columns)


def _sum(sink: Sink, query: Aggregation) -> pd.DataFrame:
    return _frame(sink.aggregate(query), query)


def _iso(seconds: float) -> str:
    text = iso_utc([seconds])[0]
    assert text is not None  # a window is after the epoch (checked by audit)
    return text


def audit(sink: Sink, config: ProbeConfig, start: float, end: float, *, lag_s: float = DEFAULT_LAG_S) -> AuditReport:
    """The books of ``[start, end)`` (UNIX seconds, UTC, cut to whole seconds as records are
    dated) from the records in ``sink``."""
    start, end = float(math.floor(start)), float(math.floor(end))
    if not 0 < start < end:
        raise ConfigError(f"an audit window runs forward, after the epoch: --from {start:g} --to {end:g}")
    reach = float(config.pool.max_interval_s)
    since, until, after = _iso(start), _iso(end), _iso(end + reach)

    snaps = _sum(
        sink,
        Aggregation("slot", ("pool", "observed_at", "interval_s"), (Total("slots"),), None, since, after),
    )
    snaps = snaps.dropna(subset=["observed_at", "interval_s"])
    interval = float(pd.to_numeric(snaps["interval_s"]).max()) if len(snaps) else 0.0

    def held(requires: tuple[str, ...]) -> pd.DataFrame:
        keys = ("pool", "submitter", "site")
        bulk = _sum(
            sink,
            Aggregation("allocation", keys, (Total("core_s", ("cpus", "interval_s")),), None, since, until, requires),
        )
        edge = (*keys, "observed_at", "interval_s")
        edges = pd.concat(
            [
                _sum(sink, Aggregation("allocation", edge, (Total("cpus", ("cpus",)),), None, a, b, requires))
                for a, b in ((since, _iso(start + reach)), (until, after))
            ],
            ignore_index=True,
        ).drop_duplicates(subset=list(edge))
        return held_core_seconds(bulk, edges, start, end)

    with_job, every = held(("job_id",)), held(())

    job_totals = (
        Total("jobs"),
        Total("cores", ("cpus",)),
        Total("cores_start", ("cpus", "start")),
        Total("cores_end", ("cpus", "end")),
    )
    parts = []
    segments = observed_segments(snaps, start, end)
    for a, b in zip(segments["start"].tolist(), segments["end"].tolist(), strict=True):
        for start_clipped in (False, True):
            for end_clipped in (False, True):
                starts = (None, a) if start_clipped else (a, b)
                ends: tuple[float | None, float | None] = (b, None) if end_clipped else (a, b)
                # the record's time is its end in whole seconds: the end itself is asked for
                # (read from each record) only where a segment's edge falls inside a second
                exact = () if all(e is None or e.is_integer() for e in ends) else (("end", *ends),)
                query = Aggregation(
                    "job", ("submitter", "site"), job_totals, None, _iso(ends[0]) if ends[0] is not None else None,
                    _iso(ends[1]) if ends[1] is not None else None, ranges=(("start", *starts), *exact),
                )  # fmt: skip
                parts.append((_sum(sink, query), a, b, start_clipped, end_clipped))
    used = job_core_seconds(parts)
    late = _sum(
        sink,
        Aggregation("job", ("submitter", "site"), job_totals, None, until, None,
                    ranges=(("start", end, end + interval),)),
    )  # fmt: skip

    slot_totals = (
        Total("snapshots"),
        Total("hours", ("interval_s",), 1 / 3600),
        Total("overhead_cu_hours", ("overhead_cu_hours",)),
        *(Total(f"{k}_{r}_hours", (f"{k}_{r}", "interval_s"), 1 / 3600) for r in RESOURCES
          for k in ("total", "unallocated")),
    )  # fmt: skip
    slot_sums = _sum(sink, Aggregation("slot", ("pool", "site", "name", "partition"), slot_totals, None, since, until))
    alloc_totals = tuple(Total(f"allocated_{r}_hours", (r, "interval_s"), 1 / 3600) for r in RESOURCES)
    alloc_sums = _sum(sink, Aggregation("allocation", ("pool", "parent"), alloc_totals, None, since, until))

    return AuditReport(
        start=start,
        end=end,
        interval_s=interval,
        lag_s=lag_s,
        submitters=submitter_books(with_job, every, used, interval_s=interval, lag_s=lag_s, late=late),
        nodes=node_books(slot_sums, alloc_sums, canonical_units(config.partitions)),
        gaps=gaps(snaps[snaps["observed_at"].astype(float) - snaps["interval_s"].astype(float) < end], start, end),
    )
