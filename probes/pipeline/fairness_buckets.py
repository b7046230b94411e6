"""The probe's ``fairness`` records: each snapshot with idle demand adds to its bucket
(Sedighi et al. 2014, "Fairness of task scheduling in high performance computing environments").

The credential is the submitter, as the negotiator names it: the negotiator shares the pool
among submitters, so one is served or starved as a whole (one Unix account submitting for
many users in accounting groups is many submitters; a user who submits both plainly and in a
group is two). Each record also names the submitter's user and group.

A bucket (``[fairness] bucket_s`` seconds, starting at multiples of it) holds many snapshots,
and the probe sees them one at a time. The bucket's running sums, per submitter, of the cores
allocated and the idle cores requested, and its number of snapshots, are a checkpoint
(:data:`~probes.sources.checkpoints.FAIRNESS_KEY`: ``{"by": "submitter", "bucket_s",
"bucket_start", "snapshots", "allocation": {submitter: cores}, "demand": {submitter: cores},
"names": {submitter: [user, group]}}``) committed with the snapshot's records; every snapshot
then writes the bucket's fairness records from the sums so far. Their ids are the bucket's and
the submitter's (:func:`collector.records.record_id`), so the last snapshot of a bucket
overwrites what the earlier ones wrote, and the records of a finished bucket are those of
:func:`~probes.accounting.fairness.bucket_shares` over all of its snapshots.

A snapshot starts a new bucket when it falls in a later one than the checkpoint's; a snapshot
in an earlier bucket (a clock set back) starts over too: its bucket is overwritten by what
this probe saw of it from then on. So does a checkpoint of sums per user (an earlier probe's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from probes.accounting.fairness import equal_shares, fairness_by_bucket
from probes.config import ProbeConfig
from probes.pipeline.analytics import demand_table
from probes.pipeline.records import Records, fairness_docs

__all__ = ["BY", "add_snapshot", "bucket_records", "bucket_shares"]

BY = "submitter"
"""The credential of the probe's fairness records."""


def add_snapshot(
    state: Mapping[str, Any] | None,
    allocations: pd.DataFrame,
    idle: pd.DataFrame,
    *,
    observed_at: float,
    bucket_s: float,
) -> dict[str, Any]:
    """The bucket's sums with one more snapshot: ``allocations`` (``submitter``, ``user``,
    ``group``, ``cpus`` per running job) and ``idle`` (autoclusters, as
    :func:`~probes.pipeline.analytics.demand_table` reads them, with ``user`` and ``group``)
    observed at ``observed_at`` (UNIX seconds)."""
    start = float(np.floor(observed_at / bucket_s) * bucket_s)
    same = (
        state is not None
        and state.get("by") == BY
        and state.get("bucket_s") == bucket_s
        and state.get("bucket_start") == start
    )
    allocation: dict[str, float] = dict(state["allocation"]) if same and state else {}
    demand: dict[str, float] = dict(state["demand"]) if same and state else {}
    names: dict[str, list[str | None]] = dict(state["names"]) if same and state else {}
    wanted = demand_table(idle, observed_at, by=BY) if len(idle) else None
    for into, frame in ((allocation, allocations), (demand, wanted)):
        if frame is None or not len(frame):
            continue
        who = frame[BY].astype(object).where(frame[BY].notna(), "(none)")
        cores = pd.to_numeric(frame["cpus"], errors="coerce").fillna(0.0)
        for name, value in cores.groupby(who.to_numpy(), sort=True).sum().items():
            into[str(name)] = into.get(str(name), 0.0) + float(value)
    for frame in (allocations, idle):  # who each submitter is, as its jobs name it (first seen)
        if len(frame) and {BY, "user", "group"} <= set(frame.columns):
            for submitter, user, group in frame[[BY, "user", "group"]].drop_duplicates(BY).itertuples(index=False):
                if isinstance(submitter, str):
                    names.setdefault(submitter, [_text(user), _text(group)])
    snapshots = (int(state["snapshots"]) if same and state else 0) + 1
    return {
        "by": BY,
        "bucket_s": bucket_s,
        "bucket_start": start,
        "snapshots": snapshots,
        "allocation": allocation,
        "demand": demand,
        "names": names,
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def bucket_shares(state: Mapping[str, Any], config: ProbeConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shares of the bucket whose sums are ``state`` (see :func:`add_snapshot`), per
    submitter with its user and group, and the bucket's Jain indices
    (:func:`~probes.accounting.fairness.fairness_by_bucket`): what its ``fairness`` records say."""
    names = sorted(set(state["allocation"]) | set(state["demand"]))
    n = float(state["snapshots"])
    frame = pd.DataFrame(
        {
            "bucket_start": float(state["bucket_start"]),
            "name": pd.Series(names, dtype=object),
            "snapshots": int(state["snapshots"]),
            "demand_cpus": [state["demand"].get(u, 0.0) / n for u in names],
            "allocation_cpus": [state["allocation"].get(u, 0.0) / n for u in names],
        }
    )
    shares = equal_shares(frame, by=BY, bucket_s=float(state["bucket_s"]), fraction=config.fairness.fraction)
    who = state.get("names", {})
    shares = shares.assign(
        user=[who.get(s, [None, None])[0] for s in names], group=[who.get(s, [None, None])[1] for s in names]
    )
    return shares, fairness_by_bucket(shares)


def bucket_records(state: Mapping[str, Any], config: ProbeConfig, *, probe: str) -> Records:
    """The ``fairness`` records of the bucket whose sums are ``state`` (see :func:`add_snapshot`)."""
    shares, buckets = bucket_shares(state, config)
    return fairness_docs(shares, buckets, pool=config.pool.name, probe=probe)
