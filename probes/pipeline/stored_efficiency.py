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
- jobs, grouped by period, ``n_hosts`` and what decides a job's sets: the slots it held
  (``hosts``: RemoteHosts, else AllRemoteHosts, else LastRemoteHost; else ``host``) and its
  own ``by`` (``speed`` is MachineAttr<attr>0): their count, cores x walltime and CPU time;
  cores x nodes x walltime is each group's sum times its ``n_hosts`` (a product of three
  fields is more than a store's sum can take).

A group's sets are then found in Python by the lookup the in-memory path makes
(:func:`probes.pipeline.analytics.job_sets`, from
:func:`~probes.pipeline.analytics.job_nodes`): each node's set is that of the slot of its
startd in the slot records, else of its machine (each slot's set being the one most of its
snapshots had); the job's own ``by`` only where they give none. A group whose nodes are in
several sets is split between them, each of its k nodes holding 1/k of its sums; its jobs
count in each of those sets, but once in ``(all)``.

These sums equal the in-memory ones (:func:`~probes.pipeline.analytics.efficiency_report` of
the same records) where a slot's unallocated amounts lie between 0 and its totals, which
the readers ensure, and the slots of a startd keep one set over the records' range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.errors import ConfigError
from collector.sinks.base import Aggregation, PeriodUnit, Sink, Total
from probes.accounting._tables import RESOURCES
from probes.accounting.efficiency import ALL, capacity_cu, efficiency_table
from probes.config import ProbeConfig
from probes.errors import SourceError
from probes.pipeline.analytics import job_sets
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
    """The store's sums of the slot records per period, set ``by`` and shape; over the whole
    range (no ``period``) by set, also per slot (``name`` and ``machine``), which gives each
    slot's set for the jobs' nodes in the same request (see :func:`_node_sets`)."""
    nodes = ["name", "machine"] if by is not None and period is None else []
    return Aggregation(
        "slot", tuple(dict.fromkeys([*nodes, *([by] if by else []), *SHAPE])), _SLOT_TOTALS, period, since, until
    )


def job_aggregation(by: str | None, period: Period, since: str | None, until: str | None) -> Aggregation:
    """The store's sums of the job records per period, node count and, by set ``by``, what
    decides a job's sets: the slots it held (``hosts``, else ``host``) and its own ``by``."""
    keys = ("hosts", "host", by, "n_hosts") if by is not None else ("n_hosts",)
    return Aggregation("job", tuple(dict.fromkeys(keys)), _JOB_TOTALS, period, since, until)


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


def _node_sets(
    sink: Sink, per_slot: pd.DataFrame | None, by: str, since: str | None, until: str | None
) -> pd.DataFrame:
    """Each slot's ``name``, ``machine`` and set: the value of ``by`` most of its snapshots had;
    from the slot sums ``per_slot`` when they are per slot (:func:`slot_aggregation` without a
    period), else from a query of their own."""
    slots = per_slot
    if slots is None:
        query = Aggregation(
            "slot", tuple(dict.fromkeys(["name", "machine", by])), (Total("snapshots"),), None, since, until
        )
        slots = _frame(sink.aggregate(query), query)
    keys = list(dict.fromkeys(["name", "machine", by]))
    rows = slots.groupby(keys, sort=False, dropna=False)["snapshots"].sum().reset_index()
    return rows.sort_values(["name", "snapshots"], ascending=[True, False], kind="stable").drop_duplicates("name")


def _job_sums(
    sink: Sink, per_slot: pd.DataFrame | None, by: str | None, period: Period, since: str | None, until: str | None
) -> tuple[pd.DataFrame, pd.Series]:
    """The job sums per period and set, and the jobs of each period (a job split over sets
    counts in each of them, but once in its period)."""
    query = job_aggregation(by, period, since, until)
    groups = _frame(sink.aggregate(query), query)
    if not len(groups):
        groups = groups.astype({"jobs": np.int64, "core_s": np.float64, "used_core_s": np.float64})
    groups["period"] = groups["period"] if period else ""
    jobs = groups.groupby("period", sort=True)["jobs"].sum()
    share = np.ones(len(groups))
    sets = np.full(len(groups), ALL, dtype=object)
    if by is not None and len(groups):  # a group's jobs share their nodes and own value: split as a job is
        pieces = job_sets(groups, _node_sets(sink, per_slot, by, since, until), by)
        groups = groups.iloc[pieces["job"].to_numpy(dtype=np.int64)].reset_index(drop=True)
        share = pieces["share"].to_numpy(dtype=np.float64)
        sets = _set_names(pieces["set"]).to_numpy(dtype=object)
    hosts = groups["n_hosts"].to_numpy(dtype=np.float64)
    hosts = np.where(np.isnan(hosts) | (hosts < 1), 1.0, hosts)
    sums = pd.DataFrame(
        {
            "period": groups["period"].to_numpy(dtype=object),
            "set": sets,
            "jobs": groups["jobs"].to_numpy(dtype=np.int64),
            "job_core_s": groups["core_s"].to_numpy(dtype=np.float64) * hosts * share,
            "used_core_s": groups["used_core_s"].to_numpy(dtype=np.float64) * share,
        }
    )
    return sums.groupby(["period", "set"], as_index=False, sort=True)[list(_JOB_SUMS)].sum(), jobs


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
    job_sums, jobs = _job_sums(sink, slots if period is None else None, by, period, since, until)
    frames = []
    for when in sorted(set(slot_sums["period"]) | set(job_sums["period"])):
        s = slot_sums.loc[slot_sums["period"] == when].drop(columns="period")
        j = job_sums.loc[job_sums["period"] == when].drop(columns="period")
        frame = efficiency_table(s, j, overall_jobs=int(jobs.get(when, 0)))
        frames.append(frame.assign(period=when)[["period", *frame.columns]] if period else frame)
    return pd.concat(frames, ignore_index=True)
