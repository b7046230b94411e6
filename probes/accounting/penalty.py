"""The multi-resource fairshare penalty of a job, and the metrics it replaces (Klusáček & Rudová
2015, "Multi-resource aware fairsharing for heterogeneous systems", section 3).

For the k-th node request of job j and a machine class i (formula 7):

    PE_k(j, i) = max over r of (w_r * req_k,r / avail_i,r) * avail_i,cpus * node_cost_i

and the job's penalty is the sum over its node requests of the cheapest price among the
classes on which the request fits, times the cost of the job's queue (formula 8):

    P(j) = queue_cost_j * sum over k of  min over i in M_k,j of PE_k(j, i)

How a request is priced on the classes (which fit it, exclusive and pinned requests, the
weights, and what a request that fits no class costs: its job is then flagged ``unmatched``)
is :mod:`probes.accounting.pricing`'s, whose names this module also offers.

Walltime is normalized by the speed of the slowest host the job used (formula 9):

    usage(j) = walltime_j * speed_j * P(j)

with speed 1.0, and ``speed_known`` false, where the host is unknown.

Beside the penalty, every output carries the metrics it replaces, each summed over the job's
nodes: ``cpu_only`` (requested cores, formula 1's usual P(j)), ``standard_job`` (formula 2:
``max over r of req_r / standard_r`` per node, which is also Slurm's MAX_TRES) and
``global_pe`` (formula 3, Moab's processor equivalent against the whole pool's totals, with
the same resources and weights as the penalty). They are computed from what was requested,
as those systems do, and without node or queue costs.

Units are HTCondor's: cores, MiB, KiB, devices; walltime in seconds, so usage is in
(speed-normalized) processor-equivalent seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import RESOURCES, amounts, floats, require_columns
from probes.accounting.machines import class_of_hosts, machines_table, pool_totals
from probes.accounting.pricing import REQUEST_COLUMNS, PenaltyPolicy, pin_mask, price_requests

__all__ = [
    "REQUEST_COLUMNS",
    "Penalties",
    "PenaltyPolicy",
    "compare_metrics",
    "job_penalties",
    "node_requests",
    "pin_mask",
    "price_requests",
]


@dataclass
class Penalties:
    """What :func:`job_penalties` found.

    ``jobs``: the jobs table with ``queue_cost``, ``penalty``, ``cpu_only``, ``standard_job``,
    ``global_pe``, ``speed_used``, ``speed_known``, ``usage``, ``unmatched`` and ``ran_on``
    (the class the job's host belongs to, or None). ``requests``: the node requests with
    their prices (see :func:`price_requests`). ``unchecked``: pinned properties that no class
    lists, so that they could not be checked, with the number of requests that named them.
    """

    jobs: pd.DataFrame
    requests: pd.DataFrame
    unchecked: dict[str, int]


def node_requests(jobs: pd.DataFrame) -> pd.DataFrame:
    """One node request per job of a jobs table: what each of its ``n_hosts`` nodes held.

    ``jobs`` needs ``cpus`` (cores), ``memory`` (MiB), ``disk`` (KiB), ``gpus`` (devices) and
    ``n_hosts`` (nodes; <NA> is 1). Returns :data:`REQUEST_COLUMNS` but ``properties``:
    ``job`` is the row's position in ``jobs``; nothing is exclusive or pinned (HTCondor jobs
    pin through their Requirements, which a jobs table does not keep).
    """
    require_columns(jobs, [*RESOURCES, "n_hosts"], "jobs table")
    n = len(jobs)
    hosts = floats(jobs["n_hosts"])
    out = pd.DataFrame(
        {"job": np.arange(n, dtype=np.int64), "count": np.where(np.isnan(hosts) | (hosts < 1), 1.0, hosts)}
    )
    for r in RESOURCES:
        out[r] = floats(jobs[r])
    out["exclusive"] = False
    return out


def job_penalties(
    jobs: pd.DataFrame,
    machines: pd.DataFrame,
    policy: PenaltyPolicy | None = None,
    *,
    requests: pd.DataFrame | None = None,
) -> Penalties:
    """Penalty, replaced metrics and walltime-normalized usage of every job (formulas 1-3, 8, 9).

    ``jobs`` needs ``queue`` (str or None), ``walltime_s`` (seconds), ``speed`` (the speed of
    the slowest host the job used; NaN where unknown) and ``host`` (for the class it ran on);
    without ``requests`` also what :func:`node_requests` needs. ``requests`` (one row per
    node request, ``job`` = the row's position in ``jobs``) gives multi-node, exclusive and
    pinned requests, e.g. from a workload log; every job needs at least one.

    A job's speed is its ``speed``, else the speed of the class its host belongs to, else 1.0
    with ``speed_known`` false. No job is dropped: the result has one row per job, in order.
    """
    policy = policy or PenaltyPolicy()
    require_columns(jobs, ["queue", "walltime_s", "speed", "host"], "jobs table")
    machines = machines_table(machines)
    if requests is None:
        requests = node_requests(jobs)
    require_columns(requests, ["job"], "requests table")
    n = len(jobs)
    job = requests["job"].to_numpy(dtype=np.int64)
    if len(job) and (job.min() < 0 or job.max() >= n):
        raise ValueError(
            f"requests table: job must be a row position in the jobs table (0..{n - 1}), got {job.min()}..{job.max()}"
        )
    missing = np.flatnonzero(np.bincount(job, minlength=n) == 0)
    if len(missing):
        raise ValueError(f"jobs table: {len(missing)} job(s) have no node request, e.g. row {int(missing[0])}")

    ran_on = class_of_hosts(machines, jobs["host"].to_numpy(dtype=object))
    priced, unchecked = price_requests(requests, machines, policy, ran_on=ran_on[job])
    count = amounts(priced["count"])
    req = {r: amounts(priced[r]) for r in RESOURCES}

    def per_job(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(np.bincount(job, weights=values, minlength=n), dtype=np.float64)

    # on an object array: several times faster than on pandas' string columns
    queue_codes, queues = pd.factorize(jobs["queue"].to_numpy(dtype=object), use_na_sentinel=True)
    costs = np.array(
        [policy.queue_costs.get(str(q), policy.default_queue_cost) for q in queues] + [policy.default_queue_cost]
    )
    queue_cost = costs[queue_codes]  # code -1 (no queue) takes the last: the default
    penalty = queue_cost * per_job(count * priced["price"].to_numpy(dtype=np.float64))
    cpu_only = per_job(count * req["cpus"])
    standard = np.zeros(len(priced))
    for r, amount in policy.standard_job.items():
        np.maximum(standard, req[r] / amount, out=standard)
    standard_job = per_job(count * standard)
    totals = pool_totals(machines)
    global_pe = np.zeros(n)
    for r, w in policy.weights().items():
        if totals[r] > 0 and np.isfinite(totals[r]):
            np.maximum(global_pe, w * per_job(count * req[r]) / totals[r], out=global_pe)
    global_pe *= totals["cpus"]

    speed = floats(jobs["speed"])
    class_speed = np.where(ran_on >= 0, machines["speed"].to_numpy()[np.maximum(ran_on, 0)], np.nan)
    speed = np.where(np.isfinite(speed) & (speed > 0), speed, class_speed)
    speed_known = np.isfinite(speed)
    speed = np.where(speed_known, speed, 1.0)
    walltime = amounts(jobs["walltime_s"])

    out = jobs.copy(deep=False)  # new columns only: the caller's table is not touched
    out["queue_cost"] = queue_cost
    out["penalty"] = penalty
    out["cpu_only"] = cpu_only
    out["standard_job"] = standard_job
    out["global_pe"] = global_pe
    out["speed_used"] = speed
    out["speed_known"] = speed_known
    out["usage"] = walltime * speed * penalty
    out["unmatched"] = per_job((~priced["fits"].to_numpy(dtype=bool)).astype(np.float64)) > 0
    out["ran_on"] = pd.Categorical.from_codes(ran_on, categories=pd.Index(machines["name"].astype(object)))
    return Penalties(jobs=out, requests=priced, unchecked=unchecked)


def compare_metrics(jobs: pd.DataFrame, by: str = "user") -> pd.DataFrame:
    """Usage per ``by`` under the penalty and under each metric it replaces: who gains, who loses.

    ``jobs`` (the output of :func:`job_penalties`) needs ``by``, ``walltime_s`` (seconds),
    ``speed_used``, ``usage``, ``cpu_only``, ``standard_job`` and ``global_pe``. Every metric
    is turned into usage the same way, ``walltime x speed x metric``, so that only the
    pricing differs. Returns one row per value of ``by`` (missing values as None), by
    decreasing usage: ``jobs``, ``usage`` (the penalty's), ``cpu_only_usage``,
    ``standard_job_usage``, ``global_pe_usage``, each one's share of its total in percent
    (``share``, ``cpu_only_share``, ...), ``ratio`` (usage / cpu_only_usage) and ``change``
    (share - cpu_only_share, in percentage points: > 0 pays more of the pool than before).
    """
    require_columns(
        jobs, [by, "walltime_s", "speed_used", "usage", "cpu_only", "standard_job", "global_pe"], "jobs table"
    )
    time = amounts(jobs["walltime_s"]) * jobs["speed_used"].to_numpy(dtype=np.float64)
    frame = pd.DataFrame(
        {
            by: jobs[by].astype(object).where(jobs[by].notna(), None).to_numpy(),
            "jobs": 1,
            "usage": jobs["usage"].to_numpy(dtype=np.float64),
            "cpu_only_usage": time * jobs["cpu_only"].to_numpy(dtype=np.float64),
            "standard_job_usage": time * jobs["standard_job"].to_numpy(dtype=np.float64),
            "global_pe_usage": time * jobs["global_pe"].to_numpy(dtype=np.float64),
        }
    )
    out = frame.groupby(by, dropna=False, sort=False).sum().reset_index()
    for metric, share in (
        ("usage", "share"),
        ("cpu_only_usage", "cpu_only_share"),
        ("standard_job_usage", "standard_job_share"),
        ("global_pe_usage", "global_pe_share"),
    ):
        total = out[metric].sum()
        out[share] = 100.0 * out[metric] / total if total > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ratio"] = np.where(out["cpu_only_usage"] > 0, out["usage"] / out["cpu_only_usage"], np.nan)
    out["change"] = out["share"] - out["cpu_only_share"]
    out[by] = out[by].astype(object).where(out[by].notna(), None)
    return out.sort_values(["usage", by], ascending=[False, True], key=_sort_key).reset_index(drop=True)


def _sort_key(values: pd.Series) -> pd.Series:
    return values.astype(str) if values.dtype == object else values
