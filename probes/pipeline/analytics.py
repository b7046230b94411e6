"""The configuration and the sources meet Jackson et al. 2001, "Improving cluster utilization
through set based allocation policies", and Sedighi et al. 2014, "Fairness of task scheduling in
high performance computing environments": efficiency by resource set, the fairness of a
snapshot's share, and the what-if emulator's inputs from a workload log.

The math is in :mod:`probes.accounting.efficiency`, :mod:`probes.accounting.fairness` and
:mod:`probes.accounting.lab`; here the tables the readers give are shaped for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from collector.errors import ConfigError
from probes.accounting._tables import floats, require_columns
from probes.accounting.efficiency import ALL, capacity_cu, drift_by, drift_loss, efficiency_table, job_sums, slot_sums
from probes.accounting.fairness import bucket_shares, fairness_by_bucket, starvation_intervals, starvation_summary
from probes.config import ProbeConfig
from probes.pipeline.overhead import canonical_units
from probes.sources.workloads.swf import Workload

__all__ = [
    "DriftReport",
    "FairnessReport",
    "demand_table",
    "efficiency_report",
    "fairness_report",
    "history_drift",
    "job_nodes",
    "job_sets",
    "node_values",
    "whatif_cluster",
    "whatif_jobs",
]


def efficiency_report(
    slots: pd.DataFrame, jobs: pd.DataFrame | None, config: ProbeConfig, *, by: str | None
) -> pd.DataFrame:
    """Scheduling, job and system efficiency (cores and canonical units) per set ``by`` of
    slots with their true overhead (a snapshot's accounting, or slot records) and the
    completed jobs (Jackson et al. 2001), summed in memory; a store's records are summed by the store
    (:mod:`probes.pipeline.stored_efficiency`).

    A job's set is that of the nodes it ran on (:func:`job_nodes`, the lookup drift uses): a
    job whose nodes are in several sets is split between them by its nodes' shares of its
    cores x walltime, and counts as a job in each of them but once overall. The store's sums
    place the jobs alike (:func:`job_sets`)."""
    slots = slots.assign(capacity_cu=capacity_cu(slots, canonical_units(config.partitions)))
    if by is not None and by not in slots.columns:
        raise ConfigError(f"--by {by!r}: the slots have no such attribute; known: {', '.join(map(str, slots.columns))}")
    if jobs is not None and len(jobs) and by is not None:
        pieces = _job_pieces(jobs, slots, by)
        return efficiency_table(slot_sums(slots, by), job_sums(pieces, by), overall_jobs=len(jobs))
    if jobs is None or not len(jobs):
        jobs = pd.DataFrame({c: [] for c in ("cpus", "n_hosts", "walltime_s", "cpu_time_s", by or "set")})
    return efficiency_table(slot_sums(slots, by), job_sums(jobs, by))


def _job_pieces(jobs: pd.DataFrame, slots: pd.DataFrame, by: str) -> pd.DataFrame:
    """The jobs table as one row per job and set it ran in: the set in ``by`` and the job's
    ``share`` there (:func:`job_sets`)."""
    sets = job_sets(jobs, slots, by)
    # only what job_sums sums (it names any that is missing): a history's other columns stay behind
    needed = [c for c in ("cpus", "n_hosts", "walltime_s", "cpu_time_s") if c in jobs.columns]
    pieces = jobs[needed].iloc[sets["job"].to_numpy(dtype=np.int64)].reset_index(drop=True)
    pieces[by] = sets["set"].to_numpy(dtype=object)
    pieces["share"] = sets["share"].to_numpy(dtype=np.float64)
    return pieces


def job_sets(jobs: pd.DataFrame, slots: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """One row per job and set it ran in, in job order: ``job`` (row position in ``jobs``),
    ``set`` (None where neither the slots nor the job give one) and ``share`` (the shares of
    its nodes in that set, :func:`job_nodes`, summed: 1 for a job in one set). Efficiency by
    set takes a job's sets from here, in memory and in a store (whose job records are grouped
    by what decides them: ``hosts``, ``host`` and ``by``; :mod:`~probes.pipeline.stored_efficiency`)."""
    nodes = job_nodes(jobs, slots, by)
    # one key per (job, set); a missing set is a set of its own, "(unknown)"
    codes, _ = pd.factorize(nodes["set"].to_numpy(dtype=object), use_na_sentinel=False)
    key = nodes["job"].to_numpy(dtype=np.int64) * (int(codes.max(initial=0)) + 1) + codes
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    share = np.bincount(inverse.ravel(), weights=nodes["share"].to_numpy(dtype=np.float64), minlength=len(keys))
    return pd.DataFrame(
        {
            "job": nodes["job"].to_numpy(dtype=np.int64)[first],
            "set": nodes["set"].to_numpy(dtype=object)[first],
            "share": share,
        }
    )


UNKNOWN = "(unknown)"
"""The set of a node whose startd the slots do not show (or whose slot lacks the set attribute),
when its job has no value of its own."""


@dataclass
class DriftReport:
    """Drift (Jackson et al. 2001) in a job history: ``nodes``, one row per job and slot it held (see
    :func:`~probes.accounting.efficiency.drift_loss`, with ``job_id``, ``user``, ``host``
    and ``startd``); ``sets`` and ``users``, :func:`~probes.accounting.efficiency.drift_by` of them;
    ``summary``, one row over all jobs; ``notes``, what was assumed and how often."""

    nodes: pd.DataFrame
    sets: pd.DataFrame
    users: pd.DataFrame
    summary: pd.DataFrame
    notes: list[str]


_SLOT_PREFIX = re.compile(r"^slot\d+(?:_\d+)?@", re.IGNORECASE | re.MULTILINE)


def _startds(names: np.ndarray) -> np.ndarray:
    """The startd of each slot name, lower-cased as host names compare: the name without its
    "slotN@" or "slotN_M@" (so "slot1_2@gpu-node1@vm" is "gpu-node1@vm", one of several startds
    of the host "vm", and a glidein's "slot1@glidein_7@host" is "glidein_7@host"). A missing
    name stays None."""
    codes, uniques = pd.factorize(names)
    text = "\n".join(map(str, uniques))
    parts = _SLOT_PREFIX.sub("", text).lower().split("\n") if len(uniques) else []
    if len(parts) != len(uniques):  # a name with a newline in it: one at a time
        parts = [_SLOT_PREFIX.sub("", str(n)).lower() for n in uniques]
    startds = np.array([*parts, None], dtype=object)
    out: np.ndarray = startds[codes]  # code -1 (no name) takes the None at the end
    return out


def node_values(hosts: np.ndarray, slots: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The slots' ``columns`` for each of ``hosts`` (slot names, as LastRemoteHost gives
    them): the slot of the same startd first (a host may run several startds, as the condor25
    pool does), else of the same ``machine`` (the part after the last '@'); NaN where
    neither is known. One row per host, in order."""
    return _startd_values(_startds(hosts), slots, columns)


def _startd_values(startd: np.ndarray, slots: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    by_startd = slots.assign(key=_startds(slots["name"].to_numpy(dtype=object))).dropna(subset=["key"])
    found = pd.DataFrame({"key": startd}).join(by_startd.drop_duplicates("key").set_index("key")[columns], on="key")
    unmatched = pd.notna(startd) & ~pd.Series(startd, dtype=object).isin(by_startd["key"]).to_numpy()
    if unmatched.any():  # a startd the slots' names do not give: its host's machine
        by_machine = slots.assign(key=slots["machine"].astype(object).str.lower()).dropna(subset=["key"])
        machine = pd.Series(startd[unmatched], dtype=object).str.rpartition("@")[2]
        found.loc[unmatched, columns] = (
            pd.DataFrame({"key": machine})
            .join(by_machine.drop_duplicates("key").set_index("key")[columns], on="key")[columns]
            .to_numpy()
        )
    return found[columns]


def job_nodes(jobs: pd.DataFrame, slots: pd.DataFrame, by: str | None, columns: Sequence[str] = ()) -> pd.DataFrame:
    """Each job's nodes and their sets: one row per slot a job held, in job order. Efficiency
    by set and drift both take a job's sets from here, so the two sections of ``fairacct
    efficiency`` place every job alike.

    ``jobs``: ``hosts`` (the comma-separated slots a job held: RemoteHosts, else AllRemoteHosts,
    else LastRemoteHost, as the history reader gives them), else ``host``; and ``by`` where the
    jobs carry their own value (``speed`` is MachineAttr<speed_attribute>0). ``slots``: a
    snapshot's slots (``name``, ``machine``, ``by`` and ``columns``); a node's values are those
    of the slot of its startd, else of its machine (see :func:`node_values`).

    Returns ``job`` (row position in ``jobs``), ``host`` (the slot's name; missing for a job that
    names none, which has one row), ``startd``, ``set``, ``own_set``, ``share`` and
    ``columns`` (the slots' values; NaN where the slots do not show the node). ``set`` is the
    slots' ``by`` of the node; where they give none (its startd is not in the status files, or
    its slot lacks ``by``) it is the job's own ``by`` (``own_set`` is True), else None; without
    ``by``, :data:`~probes.accounting.efficiency.ALL`. A job's own value was taken from the
    machine it matched (for a parallel job, one of its machines), so the status files, which
    show each node, come first. ``share`` is the node's part of its job's cores x walltime:
    HTCondor gives every node of a job the job's RequestCpus for the job's walltime, so each of
    a job's k nodes holds 1/k.
    """
    wanted = list(dict.fromkeys([*columns, *([by] if by is not None else [])]))
    require_columns(slots, ["name", "machine", *wanted], "slots table")
    none = pd.Series(None, index=jobs.index, dtype=object)
    lists = jobs["hosts"].astype(object) if "hosts" in jobs.columns else none
    last = jobs["host"].astype(object) if "host" in jobs.columns else none
    text = lists.where(lists.notna(), last).to_numpy(dtype=object)
    ran = pd.notna(text)
    # vanilla jobs (one host: most of a history) are taken as they are; only lists are split
    multi = np.zeros(len(text), dtype=bool)
    multi[ran] = pd.Series(text[ran], dtype=object).str.contains(",", regex=False).to_numpy(dtype=bool)
    single = np.flatnonzero(~multi)
    split = pd.Series(text[multi], index=np.flatnonzero(multi), dtype=object).str.split(",").explode()
    job = np.concatenate([single, split.index.to_numpy(dtype=np.int64)])
    alone = text[single]
    alone[~ran[single]] = None  # a job that never ran: one row, with no host
    host = np.concatenate([alone, split.str.strip().to_numpy(dtype=object)])
    order = np.argsort(job, kind="stable")
    job, host = job[order], host[order]
    startd = _startds(host)
    found = _startd_values(startd, slots, wanted)
    own = np.zeros(len(job), dtype=bool)
    if by is None:
        sets = np.full(len(job), ALL, dtype=object)
    else:
        sets = found[by].to_numpy(dtype=object, copy=True)
        if by in jobs.columns:
            theirs = jobs[by].to_numpy(dtype=object)[job]
            own = pd.isna(sets) & pd.notna(theirs)
            sets[own] = theirs[own]
        sets[pd.isna(sets)] = None  # one missing value, whatever the column's dtype
    nodes = pd.DataFrame(
        {
            "job": job, "host": host, "startd": startd, "set": sets, "own_set": own,
            "share": 1.0 / np.bincount(job, minlength=len(jobs))[job],
        }
    )  # fmt: skip
    for name in columns:
        nodes[name] = found[name].to_numpy()
    return nodes


def history_drift(jobs: pd.DataFrame, slots: pd.DataFrame, by: str | None, *, speed_attribute: str = "") -> DriftReport:
    """What hardware drift cost the jobs of a history (Jackson et al. 2001, section 1).

    ``jobs``: the jobs table: ``hosts`` (the comma-separated slots a job held; else ``host``),
    ``user``, ``cpus`` (cores per node: HTCondor gives each of a parallel job's nodes its
    RequestCpus) and ``walltime_s``. ``slots``: a snapshot's slots (``name``, ``machine``,
    ``speed`` and ``by``), which give each node its set and speed: the startd of the slot's
    name first (a host may run several startds, as the condor25 pool does), else its
    ``machine`` (the part after the last '@'); these are :func:`job_nodes`', as efficiency by
    set takes them. A node the slots give no ``by`` for is in its job's own ``by`` where the
    jobs have it, else in the set "(unknown)", which does not make a job mixed; a node the
    slots do not show runs at its job's pace (nothing is known of it: it neither slows the job
    nor loses). Without a ``speed_attribute`` every node has speed 1.0: mixed jobs are
    counted, nothing is lost.
    """
    for name, table, needed in (
        ("jobs table", jobs, ("user", "cpus", "walltime_s")),
        ("slots table", slots, ("name", "machine", "speed")),
    ):
        missing = [c for c in needed if c not in table.columns]
        if missing:
            raise ValueError(f"{name} is missing columns {missing}")
    if by is not None and by not in slots.columns:
        raise ConfigError(f"--by {by!r}: the slots have no such attribute; known: {', '.join(map(str, slots.columns))}")
    notes: list[str] = []
    nodes = job_nodes(jobs, slots, by, ["speed"])
    ran = nodes["host"].notna().to_numpy(dtype=bool)
    if not ran.all():  # a job that names no host has one row, with none
        notes.append(f"{int((~ran).sum())} of {len(jobs)} jobs name no host (they never ran): left out")
    nodes = nodes.loc[ran]
    job = nodes["job"].to_numpy(dtype=np.int64)
    host, startd = nodes["host"].to_numpy(dtype=object), nodes["startd"].to_numpy(dtype=object)
    speed = nodes["speed"].to_numpy(dtype=np.float64)
    unknown = np.isnan(speed)
    sets = nodes["set"].to_numpy(dtype=object)  # None (unknown) does not make a job mixed
    own = nodes["own_set"].to_numpy(dtype=bool)
    if unknown.any():
        example = sorted(set(startd[unknown].tolist()) - {None})[:1]
        notes.append(
            f"{int(unknown.sum())} nodes of {pd.unique(job[unknown]).size} jobs ran on startds the status files "
            "do not show "
            f"(e.g. {example[0] if example else None!r}): "
            f"{'' if own.any() else f'set {UNKNOWN!r}, '}at their job's pace"
        )
    if own.any():
        notes.append(
            f"{int(own.sum())} nodes of {pd.unique(job[own]).size} jobs are in the set of their job's own {by!r} "
            "(the status files give none for them)"
        )
    if not speed_attribute:
        notes.append("machines.speed_attribute is not set: every node counts at speed 1.0, so nothing is lost to drift")
    pace = pd.Series(speed).groupby(job).transform("min").to_numpy(dtype=np.float64)  # NaN ignored
    speed = np.where(unknown, np.where(np.isnan(pace), 1.0, pace), speed)
    held = pd.DataFrame(
        {
            "job": job,
            "job_id": jobs["job_id"].to_numpy(dtype=object)[job] if "job_id" in jobs.columns else job,
            "user": jobs["user"].to_numpy(dtype=object)[job],
            "host": host,
            "startd": startd,
            "set": sets,
            "speed": speed,
            "cpus": floats(jobs["cpus"])[job],
            "walltime_s": floats(jobs["walltime_s"])[job],
        }
    )
    losses = drift_loss(held, by="set")
    losses["set"] = losses["set"].where(losses["set"].notna(), UNKNOWN)
    losses["user"] = losses["user"].where(losses["user"].notna(), UNKNOWN)
    n_jobs, mixed = pd.unique(job).size, pd.unique(job[losses["mixed"].to_numpy(dtype=bool)]).size
    dedicated, lost_s = float(losses["dedicated_core_s"].sum()), float(losses["lost_core_s"].sum())
    summary = pd.DataFrame(
        {
            "jobs": [n_jobs], "mixed_jobs": [mixed], "mixed_share": [mixed / n_jobs if n_jobs else np.nan],
            "dedicated_core_s": [dedicated], "lost_core_s": [lost_s],
            "lost_share": [lost_s / dedicated if dedicated > 0 else np.nan],
            "lost_core_h": [lost_s / 3600.0], "unknown_nodes": [int(unknown.sum())],
        }
    )  # fmt: skip
    return DriftReport(losses, drift_by(losses, "set"), drift_by(losses, "user"), summary, notes)


def demand_table(idle: pd.DataFrame, observed_at: float, by: str = "submitter") -> pd.DataFrame:
    """An idle table (``request_cpus``, ``count`` and ``by``, the ``submitter`` or ``user`` of
    each row) as demand rows ``observed_at``, ``by``, ``cpus`` (idle cores requested); a row
    that names nobody (an autocluster dump's) is ``(unknown)``'s."""
    who = idle[by].astype(object).where(idle[by].notna(), "(unknown)")
    cores = pd.to_numeric(idle["request_cpus"], errors="coerce").fillna(1.0)
    cores = cores * pd.to_numeric(idle["count"], errors="coerce").fillna(0.0)
    return pd.DataFrame(
        {by: who.to_numpy(), "cpus": cores.to_numpy(dtype=np.float64), "observed_at": float(observed_at)}
    )


@dataclass
class FairnessReport:
    """``shares`` per bucket and credential, ``buckets`` (Jain's index, starvation count),
    ``intervals`` of starvation and their ``summary`` per credential."""

    shares: pd.DataFrame
    buckets: pd.DataFrame
    intervals: pd.DataFrame
    summary: pd.DataFrame


def fairness_report(
    allocations: pd.DataFrame,
    idle: pd.DataFrame | None,
    *,
    bucket_s: float,
    by: str = "submitter",
    fraction: float = 0.0,
) -> FairnessReport:
    """Sedighi et al. 2014's measures on a snapshot's allocations and idle autoclusters (every idle job
    counts as waiting at the latest ``observed_at`` of the allocations), per submitter (as the
    negotiator shares the pool) or per user."""
    if by not in ("submitter", "user"):
        raise ConfigError(f"fairness by {by!r}: idle demand names submitters and users only; use by submitter or user")
    if not len(allocations):
        raise ConfigError("no allocations (running jobs) in the status files: nothing to judge the share of")
    at = float(pd.to_numeric(allocations["observed_at"]).max())
    no_demand = pd.DataFrame({"observed_at": [], by: [], "cpus": []})
    demand = demand_table(idle, at, by) if idle is not None and len(idle) else no_demand
    shares = bucket_shares(allocations, demand, bucket_s=bucket_s, by=by, fraction=fraction)
    intervals = starvation_intervals(shares, bucket_s=bucket_s)
    return FairnessReport(shares, fairness_by_bucket(shares), intervals, starvation_summary(intervals))


def whatif_cluster(machines: pd.DataFrame, speeds: Mapping[str, float]) -> pd.DataFrame:
    """The emulator's cluster from a machines table (``name``, ``count``, ``cpus``,
    ``speed``): one set per machine class, its cores all of its nodes', its speed from
    ``speeds`` (class name -> speed) where given."""
    unknown = sorted(set(speeds) - set(machines["name"]))
    if unknown:
        raise ConfigError(
            f"--speed names classes {unknown} that the machines file does not have; it has {machines['name'].tolist()}"
        )
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
