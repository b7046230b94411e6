"""The what-if emulator of Jackson et al. 2001, "Improving cluster utilization through set based
allocation policies": a workload replayed on a heterogeneous cluster under node-allocation
policies, run times scaled by the slowest allocated node.

The cluster is a list of resource sets (``set``, ``speed``, ``cores``); the cores of a set
are interchangeable (how they are packed into nodes is not modelled). Jobs arrive at
``submit`` asking for ``cores`` for ``runtime_s`` seconds *at* ``reference_speed``; on cores
whose slowest speed is s a job runs ``runtime_s * reference_speed / s`` (the paper's section 3:
"job run times were linearly scalable with the minimum processor speed of the nodes
allocated"). The scheduler is first-come first-served with greedy backfill: at each start
or end it walks the first ``window`` waiting jobs in submission order and starts every one
the policy can place now.

Policies (the paper's section 2 and Experiments 2-4):

==================  ===================================================================
``no_sets``         any free cores, sets in the listed order: jobs span sets freely
``user_speed``      a job with ``pinned`` set runs only there; others as ``no_sets``
``firstfit``        mandated set: the first set (listed order) with enough free cores
``bestfit``         mandated set: the one with the fewest free cores that still fit
``worstfit``        mandated set: the one with the most free cores
``bestresource``    mandated set: the fastest that fits
``best_effort``     ``bestfit`` when a set fits, else any free cores (mixed)
==================  ===================================================================

A job larger than every set can never run in one: under a mandated policy it runs mixed
once enough cores are free, and is counted in ``oversize``.

Scheduling efficiency is dedicated / available core-seconds over [first submission, last
end]; job efficiency is the useful part of the dedicated core-seconds, the rest being lost
to drift (:func:`probes.accounting.efficiency.drift_loss`); system efficiency their product.
These are the paper's processor-second measures: a core-second of a slow node counts as
much as one of a fast node, so when the cluster is lightly loaded (the horizon fixed by the
workload, not by the policy) a policy that puts jobs on slow cores looks *more* efficient.
``delivered`` is the speed-weighted counterpart: the work done (cores x run time at the
reference speed, x reference speed) over what every core could have done at its own speed
over the horizon.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from probes.accounting._tables import floats, require_columns
from probes.accounting.efficiency import drift_loss

__all__ = ["WHATIF_POLICIES", "WhatIf", "emulate", "generate_cluster", "generate_workload", "whatif"]

WHATIF_POLICIES = ("no_sets", "user_speed", "firstfit", "bestfit", "worstfit", "bestresource", "best_effort")
_MANDATED = {"firstfit", "bestfit", "worstfit", "bestresource"}


@dataclass
class WhatIf:
    """One policy's emulation: ``summary`` (one row: policy, jobs, scheduling, job, system,
    delivered, mixed_jobs, mixed_share, oversize, mean_wait_s, makespan_s, lost_core_s) and ``jobs``
    (start, end, wait_s, pace, mixed per job)."""

    policy: str
    summary: dict[str, float | int | str]
    jobs: pd.DataFrame


def _take_any(free: list[int], order: Sequence[int], need: int) -> list[int]:
    got = [0] * len(free)
    for s in order:
        if need <= 0:
            break
        k = min(free[s], need)
        got[s] = k
        need -= k
    return got


def _place(
    policy: str, free: list[int], need: int, pinned: int, speeds: Sequence[float], size: Sequence[int]
) -> list[int] | None:
    """Cores per set for a job of ``need`` cores, or None when the policy cannot place it now."""
    n = len(free)
    listed = range(n)
    if policy == "user_speed" and pinned >= 0:
        policy = "pinned"
    if policy == "pinned":
        if free[pinned] < need:
            return None
        got = [0] * n
        got[pinned] = need
        return got
    if policy in ("no_sets", "user_speed"):
        return _take_any(free, listed, need) if sum(free) >= need else None
    fits = [s for s in listed if free[s] >= need]
    if not fits:
        oversize = need > max(size)
        if (policy == "best_effort" or oversize) and sum(free) >= need:
            return _take_any(free, listed, need)
        return None
    if policy == "firstfit":
        chosen = fits[0]
    elif policy in ("bestfit", "best_effort"):
        chosen = min(fits, key=lambda s: (free[s], s))
    elif policy == "worstfit":
        chosen = max(fits, key=lambda s: (free[s], -s))
    else:  # bestresource
        chosen = max(fits, key=lambda s: (speeds[s], -s))
    got = [0] * n
    got[chosen] = need
    return got


def emulate(
    cluster: pd.DataFrame,
    jobs: pd.DataFrame,
    policy: str,
    *,
    reference_speed: float | None = None,
    window: int = 100,
) -> WhatIf:
    """Replay ``jobs`` on ``cluster`` under ``policy`` (one of :data:`WHATIF_POLICIES`).

    ``cluster`` needs ``set`` (name), ``speed`` (> 0) and ``cores``; ``jobs`` needs
    ``submit`` (seconds), ``cores`` and ``runtime_s`` (seconds at ``reference_speed``,
    default the core-weighted mean speed of the cluster), and ``pinned`` (a set name or
    None) for ``user_speed``. A job asking for more cores than the cluster has is refused
    with ``ValueError``.
    """
    if policy not in WHATIF_POLICIES:
        raise ValueError(f"policy must be one of {', '.join(WHATIF_POLICIES)}, got {policy!r}")
    require_columns(cluster, ["set", "speed", "cores"], "cluster table")
    require_columns(jobs, ["submit", "cores", "runtime_s"], "jobs table")
    names = cluster["set"].astype(str).tolist()
    speeds = floats(cluster["speed"]).tolist()
    size = [int(c) for c in floats(cluster["cores"])]
    if not all(s > 0 for s in speeds) or not all(c > 0 for c in size):
        raise ValueError(
            "cluster table: every set needs a speed > 0 and cores > 0, "
            f"got {list(zip(names, speeds, size, strict=True))}"
        )
    reference = float(reference_speed) if reference_speed else float(np.dot(speeds, size) / sum(size))
    order = np.argsort(floats(jobs["submit"]), kind="stable")
    submit = floats(jobs["submit"])[order]
    need = np.ceil(np.nan_to_num(floats(jobs["cores"])[order], nan=1.0)).astype(np.int64).clip(1)
    work = np.nan_to_num(floats(jobs["runtime_s"])[order]) * reference
    if need.max(initial=0) > sum(size):
        raise ValueError(f"jobs table: a job asks for {int(need.max())} cores, more than the cluster's {sum(size)}")
    index = {name: i for i, name in enumerate(names)}
    pinned_names = (
        jobs["pinned"].to_numpy(dtype=object)[order] if "pinned" in jobs.columns else np.full(len(jobs), None)
    )
    pinned = np.array([index.get(p, -1) if isinstance(p, str) else -1 for p in pinned_names], dtype=np.int64)
    # a pin to a set too small for the job could never be honoured: the job runs unpinned
    pinned[(pinned >= 0) & (need > np.asarray(size)[np.maximum(pinned, 0)])] = -1

    n = len(submit)
    free = list(size)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    pace = np.full(n, np.nan)
    got_rows: list[tuple[int, int, int]] = []  # (job, set, cores)
    running: list[tuple[float, int, list[int]]] = []
    waiting: list[int] = []
    nxt = 0
    now = float(submit[0]) if n else 0.0
    while nxt < n or waiting or running:
        # the next event: an arrival or an end, whichever is first
        t_arrival = submit[nxt] if nxt < n else np.inf
        t_end = running[0][0] if running else np.inf
        now = float(min(t_arrival, t_end))
        while running and running[0][0] <= now:
            _, _, released = heapq.heappop(running)
            for s, k in enumerate(released):
                free[s] += k
        while nxt < n and submit[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        started = []
        for pos, j in enumerate(waiting[:window]):
            if not any(free):
                break
            got = _place(policy, free, int(need[j]), int(pinned[j]), speeds, size)
            if got is None:
                continue
            slowest = min(speeds[s] for s, k in enumerate(got) if k)
            start[j], pace[j] = now, slowest
            end[j] = now + work[j] / slowest
            for s, k in enumerate(got):
                if k:
                    free[s] -= k
                    got_rows.append((j, s, k))
            heapq.heappush(running, (float(end[j]), j, got))
            started.append(pos)
        for pos in reversed(started):
            del waiting[pos]
        if waiting and not running and nxt >= n:  # cannot happen: an empty cluster places any job
            raise RuntimeError(f"what-if emulation under {policy} is stuck with {len(waiting)} jobs waiting")
    return _summary(policy, names, speeds, size, submit, need, work, start, end, pace, got_rows)


def _summary(
    policy: str, names: list[str], speeds: list[float], size: list[int], submit: np.ndarray, need: np.ndarray,
    work: np.ndarray, start: np.ndarray, end: np.ndarray, pace: np.ndarray, got_rows: list[tuple[int, int, int]],
) -> WhatIf:  # fmt: skip
    alloc = np.asarray(got_rows, dtype=np.int64).reshape(-1, 3)
    walltime = (end - start)[alloc[:, 0]]
    nodes = pd.DataFrame(
        {
            "job": alloc[:, 0],
            "set": np.asarray(names, dtype=object)[alloc[:, 1]],
            "speed": np.asarray(speeds)[alloc[:, 1]],
            "cpus": alloc[:, 2],
            "walltime_s": walltime,
        }
    )
    losses = drift_loss(nodes)
    dedicated = float(losses["dedicated_core_s"].sum())
    lost = float(losses["lost_core_s"].sum())
    horizon = float(np.nanmax(end) - submit.min()) if len(submit) else 0.0
    available = sum(size) * horizon
    mixed = losses.groupby("job")["mixed"].first()
    scheduling = dedicated / available if available > 0 else float("nan")
    job_eff = (dedicated - lost) / dedicated if dedicated > 0 else float("nan")
    jobs = pd.DataFrame(
        {"submit": submit, "cores": need, "start": start, "end": end, "wait_s": start - submit, "pace": pace}
    )
    jobs["mixed"] = mixed.reindex(np.arange(len(jobs)), fill_value=False).to_numpy(dtype=bool)
    summary: dict[str, float | int | str] = {
        "policy": policy,
        "jobs": len(jobs),
        "scheduling": scheduling,
        "job": job_eff,
        "system": scheduling * job_eff,
        # the work done over what the cluster's speed could have done in the same time
        "delivered": float(need @ work) / (float(np.dot(speeds, size)) * horizon) if horizon > 0 else float("nan"),
        "mixed_jobs": int(jobs["mixed"].sum()),
        "mixed_share": float(jobs["mixed"].mean()) if len(jobs) else float("nan"),
        "oversize": int((need > max(size)).sum()),
        "mean_wait_s": float(jobs["wait_s"].mean()) if len(jobs) else float("nan"),
        "makespan_s": horizon,
        "lost_core_s": max(lost, 0.0),  # a sum of float round-offs can dip below 0
    }
    return WhatIf(policy=policy, summary=summary, jobs=jobs)


def whatif(
    cluster: pd.DataFrame,
    jobs: pd.DataFrame,
    policies: Sequence[str] = WHATIF_POLICIES,
    *,
    reference_speed: float | None = None,
    window: int = 100,
) -> pd.DataFrame:
    """:func:`emulate` under each of ``policies``: one summary row per policy."""
    return pd.DataFrame(
        [emulate(cluster, jobs, p, reference_speed=reference_speed, window=window).summary for p in policies]
    )


def generate_cluster(seed: int = 1) -> pd.DataFrame:
    """A heterogeneous cluster like Jackson et al. 2001's ICEBox in May 2001: nine processor-speed sets
    from 350 MHz to 1.33 GHz, 16 to 48 processors each (uniform, ``numpy.random.default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    speeds = [350, 400, 450, 500, 550, 700, 800, 1000, 1330]
    cores = rng.integers(16, 49, len(speeds))
    return pd.DataFrame({"set": [f"{s}MHz" for s in speeds], "speed": [s / 1000 for s in speeds], "cores": cores})


def generate_workload(
    cluster: pd.DataFrame, n_jobs: int = 3000, *, seed: int = 1, days: float = 30.0, pinned_share: float = 0.5
) -> pd.DataFrame:
    """A workload like Jackson et al. 2001's trace (Figure 1): ``n_jobs`` arrivals uniform over ``days``,
    sizes log-uniform from 1 to the largest set (the trace's 1-80 processors, capped so that
    every job fits some set, as the paper's mandated runs reach 100 % job efficiency),
    run times log-uniform from 10 minutes to 40 hours at the reference speed, and a share
    ``pinned_share`` of jobs asking for one set picked uniformly (the user-specified speeds
    of the CHPC trace). ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    largest = int(floats(cluster["cores"]).max())
    cores = np.floor(np.exp(rng.uniform(0, np.log(min(80, largest) + 1), n_jobs))).astype(np.int64).clip(1, largest)
    runtime = np.exp(rng.uniform(np.log(600), np.log(40 * 3600), n_jobs))
    sets = cluster["set"].astype(str).to_numpy()
    pinned = np.where(rng.random(n_jobs) < pinned_share, sets[rng.integers(0, len(sets), n_jobs)], None)  # type: ignore[call-overload]  # numpy takes None (an object array), its stubs do not
    submit = np.sort(rng.uniform(0, days * 86400, n_jobs))
    return pd.DataFrame({"submit": submit, "cores": cores, "runtime_s": runtime, "pinned": pinned})
