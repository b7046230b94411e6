"""Efficiency by resource set of the records a store holds, summed by the store (Jackson et al.
2001, "Improving cluster utilization through set based allocation policies").

The efficiency math (:mod:`probes.accounting.efficiency`) needs sums per set, so the store
computes them with :meth:`~collector.sinks.base.Sink.aggregate` (SQL ``GROUP BY`` in the
embedded store, composite aggregations in Elasticsearch/OpenSearch, as the daily summaries
are made) and only the groups come back:

- slots, grouped by period, set and *shape* (partition and ``total_<r>``): the snapshots'
  seconds, free core-seconds and true-overhead CU-seconds. A shape's canonical capacity is
  computed here once per group, since a store cannot compute it (no scripts):
  ``available = capacity x seconds`` and ``dedicated = available - overhead CU-seconds``.
- jobs, grouped by period, set and ``n_hosts``: their count, cores x walltime and CPU time;
  cores x nodes x walltime is each group's sum times its ``n_hosts`` (a product of three
  fields is more than a store's sum can take).

A job's set is its own ``by`` field when job records have it (site, resource name, speed);
otherwise that of the startd it ran on (``host``; else its machine, as
:func:`probes.pipeline.analytics.node_values` matches them), from the slot records: the jobs
are then grouped by host, and each slot's set is the one most of its snapshots had.

These sums equal the in-memory ones (:func:`~probes.pipeline.analytics.efficiency_report` of
the same records) where a slot's unallocated amounts lie between 0 and its totals, which
the readers ensure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.errors import ConfigError, SourceError
from collector.sinks.base import Aggregation, PeriodUnit, Sink, Total
from probes.accounting._tables import RESOURCES
from probes.accounting.efficiency import ALL, capacity_cu, efficiency_table
from probes.config import ProbeConfig
from probes.pipeline.analytics import node_values
from probes.pipeline.overhead import canonical_units

__all__ = ["SHAPE", "job_aggregation", "slot_aggregation", "store_efficiency"]

Period = PeriodUnit | None

SHAPE = ("partition", *(f"total_{r}" for r in RESOURCES))
"""What a slot's canonical capacity depends on: the slots are summed per shape."""

_SLOT_TOTALS = (
    Total("snapshots"),
    Total("seconds", ("interval_s",)),
    Total("free_core_s", ("unallocated_cpus", "interval_s")),
    Total("overhead_cu_s", ("overhead_cu", "interval_s")),
)
_JOB_TOTALS = (Total("jobs"), Total("core_s", ("cpus", "walltime_s")), Total("used_core_s", ("cpu_time_s",)))
_SLOT_SUMS = ("available_core_s", "dedicated_core_s", "available_cu_s", "dedicated_cu_s")
_JOB_SUMS = ("jobs", "job_core_s", "used_core_s")


def slot_aggregation(by: str | None, period: Period, since: str | None, until: str | None) -> Aggregation:
    """The store's sums of the slot records per period, set ``by`` and shape."""
    return Aggregation(
        "slot", tuple(dict.fromkeys([*([by] if by else []), *SHAPE])), _SLOT_TOTALS, period, since, until
    )


def job_aggregation(key: str | None, period: Period, since: str | None, until: str | None) -> Aggregation:
    """The store's sums of the job records per period, ``key`` (the set, or ``host``) and node count."""
    return Aggregation("job", (*([key] if key else []), "n_hosts"), _JOB_TOTALS, period, since, until)


def _frame(rows: list[dict[str, Any]], query: Aggregation) -> pd.DataFrame:
    columns = (["period"] if query.period else []) + list(query.group_by) + [t.name for t in query.totals]
    return pd.DataFrame(rows, columns=columns)


def _set_names(values: pd.Series) -> pd.Series:
    """Set names as the in-memory path makes them: strings, '(unknown)' where missing."""
    return values.astype(object).map(lambda v: "(unknown)" if pd.isna(v) else str(v))


def _slot_sums(groups: pd.DataFrame, by: str | None, config: ProbeConfig, period: Period) -> pd.DataFrame:
    seconds = groups["seconds"].to_numpy(dtype=np.float64)
    total = np.nan_to_num(groups["total_cpus"].to_numpy(dtype=np.float64))
    shapes = groups[list(SHAPE)].assign(**{f"unallocated_{r}": 0.0 for r in RESOURCES}, interval_s=0.0)
    capacity = capacity_cu(
        shapes.astype({f"total_{r}": np.float64 for r in RESOURCES}), canonical_units(config.partitions)
    ).to_numpy(dtype=np.float64)
    known = ~np.isnan(capacity)
    available_cu = np.where(known, np.nan_to_num(capacity) * seconds, 0.0)
    sums = pd.DataFrame(
        {
            "period": groups["period"] if period else "",
            "set": _set_names(groups[by]) if by else ALL,
            "available_core_s": total * seconds,
            "dedicated_core_s": total * seconds - groups["free_core_s"].to_numpy(dtype=np.float64),
            "available_cu_s": available_cu,
            "dedicated_cu_s": np.where(known, available_cu - groups["overhead_cu_s"].to_numpy(dtype=np.float64), 0.0),
        }
    )
    return sums.groupby(["period", "set"], as_index=False, sort=True)[list(_SLOT_SUMS)].sum()


def _node_sets(sink: Sink, by: str, since: str | None, until: str | None) -> pd.DataFrame:
    """Each slot's ``name``, ``machine`` and set: the value of ``by`` most of its snapshots had."""
    query = Aggregation(
        "slot", tuple(dict.fromkeys(["name", "machine", by])), (Total("snapshots"),), None, since, until
    )
    rows = _frame(sink.aggregate(query), query)
    return rows.sort_values(["name", "snapshots"], ascending=[True, False], kind="stable").drop_duplicates("name")


def _job_sums(sink: Sink, by: str | None, period: Period, since: str | None, until: str | None) -> pd.DataFrame:
    query = job_aggregation(by, period, since, until)
    groups = _frame(sink.aggregate(query), query)
    if by is not None and len(groups) and groups[by].isna().all():  # job records lack the attribute
        query = job_aggregation("host", period, since, until)
        groups = _frame(sink.aggregate(query), query)
        nodes = node_values(groups["host"].to_numpy(dtype=object), _node_sets(sink, by, since, until), [by])
        groups[by] = nodes[by].to_numpy(dtype=object)
    hosts = groups["n_hosts"].to_numpy(dtype=np.float64)
    hosts = np.where(np.isnan(hosts) | (hosts < 1), 1.0, hosts)
    sums = pd.DataFrame(
        {
            "period": groups["period"] if period else "",
            "set": _set_names(groups[by]) if by else ALL,
            "jobs": groups["jobs"].to_numpy(dtype=np.int64),
            "job_core_s": groups["core_s"].to_numpy(dtype=np.float64) * hosts,
            "used_core_s": groups["used_core_s"].to_numpy(dtype=np.float64),
        }
    )
    return sums.groupby(["period", "set"], as_index=False, sort=True)[list(_JOB_SUMS)].sum()


def store_efficiency(
    sink: Sink,
    config: ProbeConfig,
    *,
    by: str | None,
    period: Period = None,
    since: str | None = None,
    until: str | None = None,
) -> pd.DataFrame:
    """Scheduling, job and system efficiency per set (and ``period`` of the records' time,
    'YYYY-MM-DD' or 'YYYY-MM', in a ``period`` column first) of the slot and job records the
    store holds between ``since`` and ``until`` (ISO-8601 UTC), summed in the store.
    Returns :data:`~probes.accounting.efficiency.EFFICIENCY_COLUMNS` (and ``period``)."""
    query = slot_aggregation(by, period, since, until)
    slots = _frame(sink.aggregate(query), query)
    if not len(slots):
        raise SourceError(f"no slot records in the store between {since or 'the first'} and {until or 'the last'}")
    if by is not None and slots[by].isna().all():
        raise ConfigError(
            f"--by {by!r}: no slot record in the store has that attribute (is it a field of the slot records?)"
        )
    slot_sums = _slot_sums(slots, by, config, period)
    job_sums = _job_sums(sink, by, period, since, until)
    frames = []
    for when in sorted(set(slot_sums["period"]) | set(job_sums["period"])):
        s = slot_sums.loc[slot_sums["period"] == when].drop(columns="period")
        j = job_sums.loc[job_sums["period"] == when].drop(columns="period")
        frame = efficiency_table(s, j)
        frames.append(frame.assign(period=when)[["period", *frame.columns]] if period else frame)
    return pd.concat(frames, ignore_index=True)
