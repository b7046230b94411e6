"""Efficiency by resource set, and the capacity lost to hardware drift (Jackson et al. 2001,
"Improving cluster utilization through set based allocation policies").

A *resource set* is the nodes that share a value of an attribute the operator names (CPU
model, a speed band, site, any startd attribute), as Maui's NODESET groups them. Per set,
with Maui's definitions (Jackson et al. 2001, section 3, after Experiment 1's setup):

    scheduling efficiency = resources dedicated to jobs / resources available
    job efficiency        = resources used by jobs / resources dedicated to jobs
    system efficiency     = scheduling efficiency * job efficiency

Scheduling efficiency comes from the slot snapshots, in cores (core-seconds dedicated over
core-seconds present) and in canonical units (CU-seconds a node could hold, less its true
overhead: what nobody could have used is the loss, Andrijauskas et al. 2023, "Defining a canonical
unit for accounting purposes"). Job efficiency comes from the
completed jobs, CPU time over cores x walltime, summed before dividing so that it is
"a job size-duration weighted job efficiency value" as Maui reports it.

Everything is computed in two steps: sums per set (:func:`slot_sums`, :func:`job_sums`),
which add up across chunks of a year of records or come straight from a store's
aggregations, then the ratios (:func:`efficiency_table`).

*Drift* (Jackson et al. 2001, section 1): a parallel job that is not self-balancing runs at the pace of
its slowest node, so on a node of speed s_i a job whose slowest node has speed s_min is
useful for s_min / s_i of its walltime; the rest of the cores x walltime it holds there is
lost to drift (:func:`drift_loss`). A job is *mixed* when its nodes are in more than one set.

Units: cores, seconds (UTC UNIX times), core-seconds and CU-seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from probes.accounting._tables import RESOURCES, floats, require_columns
from probes.accounting.canonical import CanonicalUnit, true_overhead

__all__ = [
    "ALL",
    "EFFICIENCY_COLUMNS",
    "add_sums",
    "capacity_cu",
    "drift_by",
    "drift_loss",
    "efficiency_table",
    "job_sums",
    "slot_sums",
]

ALL = "(all)"
"""The set name of the overall row, and of every row when no set attribute is given."""

EFFICIENCY_COLUMNS = (
    "set", "available_core_s", "dedicated_core_s", "scheduling", "available_cu_s", "dedicated_cu_s", "scheduling_cu",
    "jobs", "job_core_s", "used_core_s", "job", "system", "system_cu",
)  # fmt: skip
"""The columns of :func:`efficiency_table`."""


def _sum_by_set(table: pd.DataFrame, by: str | None, input_name: str, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """``columns`` summed per value of ``by`` (missing: "(unknown)"), sorted by set: one
    factorize and a bincount per column, several times faster than a groupby on strings
    (and a categorical ``by`` column, as a store's pages of a year carry it, is faster still)."""
    if by is None:
        codes, names = np.zeros(len(table), dtype=np.int64), [ALL]
    else:
        require_columns(table, [by], input_name)
        column = table[by]
        # a categorical column is already factorized; strings are fastest as an object array
        values = column if isinstance(column.dtype, pd.CategoricalDtype) else column.to_numpy(dtype=object)
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        names = [str(u) for u in uniques]
        if (codes < 0).any():
            codes = np.where(codes < 0, len(names), codes)
            names.append("(unknown)")
    out = pd.DataFrame({"set": np.asarray(names, dtype=object)})
    for name, values in columns.items():
        out[name] = np.bincount(codes, weights=values, minlength=len(names)) if len(values) else np.zeros(len(names))
    return out.sort_values("set", kind="stable").reset_index(drop=True)


def capacity_cu(slots: pd.DataFrame, units: Mapping[str, CanonicalUnit]) -> pd.Series:
    """How many canonical units each slot holds when empty: its true overhead with nothing
    allocated (Andrijauskas et al. 2023's formula on the totals). ``slots`` needs what
    :func:`~probes.accounting.canonical.true_overhead` needs."""
    empty = slots.assign(
        **{f"unallocated_{r}": slots[f"total_{r}"] for r in RESOURCES if f"total_{r}" in slots.columns}
    )
    return true_overhead(empty, units)["overhead_cu"]


def slot_sums(slots: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Core-seconds (and CU-seconds) available and dedicated per resource set.

    ``slots`` needs ``total_cpus`` and ``unallocated_cpus`` (cores) and ``interval_s``
    (seconds the observation stands for), one row per partitionable or static slot and
    snapshot; with ``overhead_cu`` (true overhead) and ``capacity_cu`` (see
    :func:`capacity_cu`) also the CU-seconds, else those are NaN; ``by``: the set attribute.
    Returns ``set``, ``available_core_s``, ``dedicated_core_s``, ``available_cu_s``,
    ``dedicated_cu_s``, one row per set.
    """
    require_columns(slots, ["total_cpus", "unallocated_cpus", "interval_s"], "slots table")
    interval = np.nan_to_num(floats(slots["interval_s"]))
    total = np.nan_to_num(floats(slots["total_cpus"]))
    free = np.clip(np.nan_to_num(floats(slots["unallocated_cpus"])), 0.0, total)
    columns = {"available_core_s": total * interval, "dedicated_core_s": (total - free) * interval}
    if "overhead_cu" in slots.columns and "capacity_cu" in slots.columns:
        capacity = floats(slots["capacity_cu"])
        # unmatched slots have no CU to count; an unknown overhead counts as none, as an
        # unknown number of free cores counts as none (a store's sums count a missing field as 0)
        overhead = np.nan_to_num(floats(slots["overhead_cu"]))
        known = ~np.isnan(capacity)
        columns["available_cu_s"] = np.where(known, capacity * interval, 0.0)
        columns["dedicated_cu_s"] = np.where(known, np.clip(capacity - overhead, 0.0, None) * interval, 0.0)
    else:
        columns["available_cu_s"] = columns["dedicated_cu_s"] = np.full(len(slots), np.nan)
    return _sum_by_set(slots, by, "slots table", columns)


def job_sums(jobs: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Core-seconds dedicated to and used by completed jobs per resource set.

    ``jobs`` needs ``cpus`` (cores per node), ``n_hosts`` (nodes; missing is 1),
    ``walltime_s`` and ``cpu_time_s`` (seconds); ``by``: the set attribute. A job whose nodes
    are in several sets is one row per set, with its ``share`` there (its nodes' part of its
    cores x walltime; no column: every row is a whole job): the row counts as a job of that
    set and adds that share of the job's core-seconds and CPU time. Returns ``set``, ``jobs``,
    ``job_core_s`` (cores x nodes x walltime) and ``used_core_s`` (CPU time).
    """
    require_columns(jobs, ["cpus", "n_hosts", "walltime_s", "cpu_time_s"], "jobs table")
    hosts = floats(jobs["n_hosts"])
    hosts = np.where(np.isnan(hosts) | (hosts < 1), 1.0, hosts)
    share = np.nan_to_num(floats(jobs["share"]), nan=1.0) if "share" in jobs.columns else np.ones(len(jobs))
    columns = {
        "jobs": np.ones(len(jobs)),
        "job_core_s": np.nan_to_num(floats(jobs["cpus"])) * hosts * np.nan_to_num(floats(jobs["walltime_s"])) * share,
        "used_core_s": np.nan_to_num(floats(jobs["cpu_time_s"])) * share,
    }
    out = _sum_by_set(jobs, by, "jobs table", columns)
    out["jobs"] = out["jobs"].astype(np.int64)
    return out


def add_sums(parts: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Sums of several chunks (of :func:`slot_sums` or of :func:`job_sums`) as one."""
    frames = [p for p in parts if len(p)]
    if not frames:
        raise ValueError("add_sums needs at least one non-empty table of sums")
    return pd.concat(frames, ignore_index=True).groupby("set", sort=True, as_index=False).sum(min_count=1)


def efficiency_table(slots: pd.DataFrame, jobs: pd.DataFrame, *, overall_jobs: int | None = None) -> pd.DataFrame:
    """Scheduling, job and system efficiency per set and overall (the last row, set
    :data:`ALL`, unless every row already is).

    ``slots`` needs the columns of :func:`slot_sums`' result and ``jobs`` those of
    :func:`job_sums`'. A set with no slots or no jobs has NaN where it lacks the numbers.
    ``overall_jobs``: the jobs of the overall row when a job split over several sets counts in
    each of them (default: the sets' sum). Returns :data:`EFFICIENCY_COLUMNS`.
    """
    require_columns(
        slots, ["set", "available_core_s", "dedicated_core_s", "available_cu_s", "dedicated_cu_s"], "slot sums"
    )
    require_columns(jobs, ["set", "jobs", "job_core_s", "used_core_s"], "job sums")
    merged = slots.merge(jobs, on="set", how="outer").sort_values("set", kind="stable")
    if not (merged["set"] == ALL).all():
        overall = merged.drop(columns=["set"]).sum(min_count=1).to_frame().T.assign(set=ALL)
        if overall_jobs is not None:
            overall["jobs"] = overall_jobs
        merged = pd.concat([merged, overall], ignore_index=True)
    merged["jobs"] = merged["jobs"].fillna(0).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        merged["scheduling"] = _ratio(merged["dedicated_core_s"], merged["available_core_s"])
        merged["scheduling_cu"] = _ratio(merged["dedicated_cu_s"], merged["available_cu_s"])
        merged["job"] = _ratio(merged["used_core_s"], merged["job_core_s"])
    merged["system"] = merged["scheduling"] * merged["job"]
    merged["system_cu"] = merged["scheduling_cu"] * merged["job"]
    return merged.reindex(columns=list(EFFICIENCY_COLUMNS)).reset_index(drop=True)


def _ratio(numerator: pd.Series, denominator: pd.Series) -> np.ndarray:
    n = numerator.to_numpy(dtype=np.float64)
    d = denominator.to_numpy(dtype=np.float64)
    return np.where(d > 0, n / np.where(d > 0, d, 1.0), np.nan)


def drift_loss(nodes: pd.DataFrame, by: str = "set") -> pd.DataFrame:
    """What each node of each job lost to drift.

    ``nodes`` needs, one row per node a job held: ``job`` (any id), ``by`` (its resource
    set), ``speed`` (the node's relative speed, > 0), ``cpus`` (cores the job held there) and
    ``walltime_s`` (the job's walltime, at its slowest node's pace). Returns a copy with
    ``pace`` (the job's slowest speed), ``mixed`` (the job spans sets), ``dedicated_core_s``
    (cpus x walltime), ``useful_core_s`` (x pace / speed) and ``lost_core_s`` (the rest).
    """
    require_columns(nodes, ["job", by, "speed", "cpus", "walltime_s"], "nodes table")
    speed = floats(nodes["speed"])
    if not (speed > 0).all():
        raise ValueError(f"nodes table: every node needs a speed > 0, got {speed[~(speed > 0)][:5].tolist()}")
    job = nodes["job"]
    pace = pd.Series(speed, index=nodes.index).groupby(job.to_numpy(), sort=False).transform("min").to_numpy()
    sets = nodes[by].astype(object).to_numpy()
    mixed = pd.Series(sets, index=nodes.index).groupby(job.to_numpy(), sort=False).transform("nunique").to_numpy() > 1
    dedicated = np.nan_to_num(floats(nodes["cpus"])) * np.nan_to_num(floats(nodes["walltime_s"]))
    useful = dedicated * pace / speed
    return nodes.assign(
        pace=pace, mixed=mixed, dedicated_core_s=dedicated, useful_core_s=useful, lost_core_s=dedicated - useful
    )


def drift_by(losses: pd.DataFrame, key: str) -> pd.DataFrame:
    """Drift per ``key`` (a set or a user): ``jobs``, ``mixed_jobs``, ``mixed_share``,
    ``dedicated_core_s``, ``lost_core_s`` and ``lost_share``.

    ``losses`` needs ``job``, ``key``, ``mixed``, ``dedicated_core_s`` and ``lost_core_s``
    (as :func:`drift_loss` gives). A job counts once per value of ``key`` it touches.
    """
    require_columns(losses, ["job", key, "mixed", "dedicated_core_s", "lost_core_s"], "drift table")
    g = losses.groupby(key, sort=True)
    jobs = g["job"].nunique()
    mixed = (
        losses.loc[losses["mixed"].to_numpy(dtype=bool)].groupby(key)["job"].nunique().reindex(jobs.index, fill_value=0)
    )
    dedicated = g["dedicated_core_s"].sum()
    lost = g["lost_core_s"].sum()
    return pd.DataFrame(
        {
            key: jobs.index.to_numpy(dtype=object),
            "jobs": jobs.to_numpy(dtype=np.int64),
            "mixed_jobs": mixed.to_numpy(dtype=np.int64),
            "mixed_share": mixed.to_numpy(dtype=np.float64) / jobs.to_numpy(dtype=np.float64),
            "dedicated_core_s": dedicated.to_numpy(),
            "lost_core_s": lost.to_numpy(),
            "lost_share": np.where(
                dedicated.to_numpy() > 0, lost.to_numpy() / np.where(dedicated > 0, dedicated, 1.0), np.nan
            ),
        }
    )
