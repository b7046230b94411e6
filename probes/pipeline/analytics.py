"""The configuration and the sources meet seeds 001 and 002: efficiency by resource set,
the fairness of a snapshot's share, and the what-if emulator's inputs from a workload log.

The math is in :mod:`probes.accounting.efficiency`, :mod:`probes.accounting.fairness` and
:mod:`probes.accounting.lab`; here the tables the readers give are shaped for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from collector.errors import ConfigError
from probes.accounting.efficiency import capacity_cu, efficiency_table, job_sums, slot_sums
from probes.accounting.fairness import bucket_shares, fairness_by_bucket, starvation_intervals, starvation_summary
from probes.config import ProbeConfig
from probes.pipeline.overhead import canonical_units
from probes.sources.workloads.swf import Workload

__all__ = [
    "FairnessReport",
    "demand_table",
    "efficiency_report",
    "fairness_report",
    "job_sets",
    "whatif_cluster",
    "whatif_jobs",
]


def job_sets(jobs: pd.DataFrame, slots: pd.DataFrame, by: str) -> pd.Series:
    """Each job's resource set: its own ``by`` column when the jobs table has it, else the
    ``by`` of the machine it ran on (the part of ``host`` after '@', as in LastRemoteHost)."""
    if by in jobs.columns:
        return jobs[by]
    if by not in slots.columns:
        raise ConfigError(f"--by {by!r}: neither the slots nor the jobs have that attribute; add it to sources' extra attributes")
    per_machine = slots.drop_duplicates("machine").set_index("machine", drop=False)[by]
    machine = jobs["host"].astype(object).map(lambda h: h.rpartition("@")[2] if isinstance(h, str) else None)
    return machine.map(per_machine)


def efficiency_report(slots: pd.DataFrame, jobs: pd.DataFrame | None, config: ProbeConfig, *, by: str | None) -> pd.DataFrame:
    """Scheduling, job and system efficiency (cores and canonical units) per set ``by`` of
    slots with their true overhead (a snapshot's accounting, or slot records) and the
    completed jobs (seed 001), summed in memory; a store's records are summed by the store
    (:mod:`probes.pipeline.stored_efficiency`)."""
    slots = slots.assign(capacity_cu=capacity_cu(slots, canonical_units(config.partitions)))
    if by is not None and by not in slots.columns:
        raise ConfigError(f"--by {by!r}: the slots have no such attribute; known: {', '.join(map(str, slots.columns))}")
    if jobs is None or not len(jobs):
        jobs = pd.DataFrame({c: [] for c in ("cpus", "n_hosts", "walltime_s", "cpu_time_s", by or "set")})
    elif by is not None:
        jobs = jobs.assign(**{by: job_sets(jobs, slots, by)})
    return efficiency_table(slot_sums(slots, by), job_sums(jobs, by))


def demand_table(idle: pd.DataFrame, observed_at: float) -> pd.DataFrame:
    """An idle table (autoclusters: ``request_cpus``, ``count``, ``users``) as demand rows
    ``observed_at``, ``user``, ``cpus`` (idle cores requested). An autocluster shared by
    several users (``users`` joined by commas) is split evenly among them."""
    users = idle["users"].astype(object).map(lambda u: u.split(",") if isinstance(u, str) and u else ["(unknown)"])
    cores = pd.to_numeric(idle["request_cpus"], errors="coerce").fillna(1.0)
    cores = cores * pd.to_numeric(idle["count"], errors="coerce").fillna(0.0)
    frame = pd.DataFrame({"user": users, "cpus": cores / users.map(len)}).explode("user")
    return frame.assign(observed_at=float(observed_at)).reset_index(drop=True)


@dataclass
class FairnessReport:
    """``shares`` per bucket and credential, ``buckets`` (Jain's index, starvation count),
    ``intervals`` of starvation and their ``summary`` per credential."""

    shares: pd.DataFrame
    buckets: pd.DataFrame
    intervals: pd.DataFrame
    summary: pd.DataFrame


def fairness_report(
    allocations: pd.DataFrame, idle: pd.DataFrame | None, *, bucket_s: float, by: str = "user", fraction: float = 0.0
) -> FairnessReport:
    """Seed 002's measures on a snapshot's allocations and idle autoclusters (every idle job
    counts as waiting at the latest ``observed_at`` of the allocations)."""
    if by != "user":
        raise ConfigError(f"fairness by {by!r}: idle autoclusters name users only; use by user")
    if not len(allocations):
        raise ConfigError("no allocations (running jobs) in the status files: nothing to judge the share of")
    at = float(pd.to_numeric(allocations["observed_at"]).max())
    no_demand = pd.DataFrame({"observed_at": [], "user": [], "cpus": []})
    demand = demand_table(idle, at) if idle is not None and len(idle) else no_demand
    shares = bucket_shares(allocations, demand, bucket_s=bucket_s, by=by, fraction=fraction)
    intervals = starvation_intervals(shares, bucket_s=bucket_s)
    return FairnessReport(shares, fairness_by_bucket(shares), intervals, starvation_summary(intervals))


def whatif_cluster(machines: pd.DataFrame, speeds: Mapping[str, float]) -> pd.DataFrame:
    """The emulator's cluster from a machines table (``name``, ``count``, ``cpus``,
    ``speed``): one set per machine class, its cores all of its nodes', its speed from
    ``speeds`` (class name -> speed) where given."""
    unknown = sorted(set(speeds) - set(machines["name"]))
    if unknown:
        raise ConfigError(f"--speed names classes {unknown} that the machines file does not have; it has {machines['name'].tolist()}")
    speed = machines["name"].map(lambda n: speeds.get(n)).astype("float64").fillna(machines["speed"].astype("float64"))
    cores = (machines["count"] * machines["cpus"]).to_numpy()
    return pd.DataFrame({"set": machines["name"].to_numpy(), "speed": speed.to_numpy(), "cores": cores})


def whatif_jobs(workload: Workload, sets: pd.Series) -> pd.DataFrame:
    """The emulator's jobs from a workload log: ``submit`` (qdate), ``cores`` (every node
    request's count x cores), ``runtime_s`` (walltime) and ``pinned`` (the set a
    ``cluster=NAME`` property of the job names, which is what a user-specified speed is in
    MetaCentrum's logs)."""
    req = workload.requests
    cores = (req["count"] * req["cpus"]).groupby(req["job"]).sum()
    known = set(sets.astype(str))

    def pin(props: object) -> str | None:
        for p in props if isinstance(props, (tuple, list, frozenset)) else ():
            name = str(p).partition("cluster=")[2]
            if name in known:
                return name
        return None

    pins = req.groupby("job")["properties"].first().map(pin)
    n = len(workload.jobs)
    return pd.DataFrame(
        {
            "submit": workload.jobs["qdate"].to_numpy(dtype=np.float64),
            "cores": cores.reindex(np.arange(n), fill_value=1.0).to_numpy(),
            "runtime_s": workload.jobs["walltime_s"].to_numpy(dtype=np.float64),
            "pinned": pd.Series([p if isinstance(p, str) else None for p in pins.reindex(np.arange(n))], dtype=object),
        }
    )
