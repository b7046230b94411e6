"""The fairness of the share itself: demand against allocation per credential and time bucket,
Jain's index and starvation (Sedighi et al. 2014, "Fairness of task scheduling in high
performance computing environments").

The paper shows that a queue-proportional share (its formula 2.1) can be gamed: a user who
bursts tasks into the queue takes the pool, and the others are *temporally starved*: they
have work waiting and get nothing (or next to nothing) while others are served. This module
measures that on any pair of tables saying, at instants, who holds how many cores and who
waits for how many:

- per bucket of ``bucket_s`` seconds (buckets start at multiples of ``bucket_s``, UNIX time,
  as fairshare windows do) and credential: mean cores allocated and mean idle cores
  requested over the bucket's snapshots;
- ``served`` = allocation / (allocation + demand): the part of what a credential wanted that
  it got (1 when nothing waits). The paper's "allocation / demand" with the demand counted
  as what was wanted at all, so that a credential with nothing idle is not a division by 0;
- its equal share of what the pool delivered in the bucket (allocation of all / number of
  active credentials), and ``starved``: demand > 0, allocation <= ``fraction`` x share and
  some other credential allocated. ``fraction = 0`` is the paper's "got nothing";
- Jain's index (Jain, Chiu, Hawe 1984), ``J(x) = (sum x)^2 / (n sum x^2)``, 1 when all n
  values are equal and 1/n when one takes everything, over the active credentials of a
  bucket, once of ``served`` and once of the allocation itself. A queue-proportional share
  gives every credential the same ``served`` (J = 1) however unequal the allocations are:
  that is the paper's "false sense of fairness" (section 7), and why both are reported.

Units: cores (``cpus``), times UNIX seconds (UTC), durations seconds.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import floats, require_columns

__all__ = [
    "FAIRNESS_COLUMNS",
    "bucket_shares",
    "equal_shares",
    "fairness_by_bucket",
    "jain_index",
    "starvation_intervals",
    "starvation_summary",
]

FAIRNESS_COLUMNS = (
    "bucket_start", "bucket_end", "type", "name", "snapshots", "demand_cpus", "allocation_cpus",
    "served", "share_cpus", "starved",
)  # fmt: skip
"""The columns of :func:`bucket_shares`' table, one row per bucket and credential."""


def jain_index(values: npt.ArrayLike) -> float:
    """Jain's fairness index of ``values`` (>= 0): ``(sum x)^2 / (n sum x^2)``; NaN for no values
    or all zeros (nobody got anything: neither fair nor unfair)."""
    x = np.asarray(values, dtype=np.float64)
    square = float((x * x).sum())
    if not len(x) or square == 0.0:
        return float("nan")
    return float(x.sum()) ** 2 / (len(x) * square)


def _per_bucket(table: pd.DataFrame, by: str, bucket_s: float, input_name: str) -> pd.DataFrame:
    require_columns(table, ["observed_at", by, "cpus"], input_name)
    at = floats(table["observed_at"])
    cpus = floats(table["cpus"])
    if np.isnan(at).any():
        raise ValueError(
            f"{input_name}: every row needs observed_at (UNIX seconds), got {int(np.isnan(at).sum())} without"
        )
    return pd.DataFrame(
        {
            "bucket_start": np.floor(at / bucket_s) * bucket_s,
            "observed_at": at,
            "name": table[by].astype(object).where(table[by].notna(), "(none)").to_numpy(),
            "cpus": np.nan_to_num(cpus, nan=0.0),
        }
    )


def bucket_shares(
    allocations: pd.DataFrame,
    demand: pd.DataFrame,
    *,
    bucket_s: float,
    by: str = "user",
    fraction: float = 0.0,
) -> pd.DataFrame:
    """Demand and allocation per bucket and credential, with the equal share and starvation.

    ``allocations`` needs ``observed_at`` (UNIX seconds), ``by`` (the credential, e.g.
    ``user``) and ``cpus`` (cores allocated), one row per running job (dynamic slot) and
    snapshot, as the allocations table is. ``demand`` needs the same columns with ``cpus``
    the idle cores requested (request x count of an autocluster); a snapshot that saw no idle
    job may have no rows. A snapshot is an ``observed_at`` of either table; a bucket's means
    divide by its number of snapshots. ``fraction`` (0..1) of the equal share below which a
    credential with demand counts as starved.

    Returns :data:`FAIRNESS_COLUMNS`, sorted by bucket and name; ``type`` is ``by``.
    """
    if not (np.isfinite(bucket_s) and bucket_s > 0):
        raise ValueError(f"bucket_s must be a number of seconds greater than 0, got {bucket_s!r}")
    if not (0.0 <= fraction <= 1.0):
        raise ValueError(f"fraction of the equal share must be between 0 and 1, got {fraction!r}")
    alloc = _per_bucket(allocations, by, bucket_s, "allocations table")
    want = _per_bucket(demand, by, bucket_s, "demand table")
    both = pd.concat([alloc[["bucket_start", "observed_at"]], want[["bucket_start", "observed_at"]]])
    snapshots = both.drop_duplicates().groupby("bucket_start").size().rename("snapshots")
    a = alloc.groupby(["bucket_start", "name"], sort=False)["cpus"].sum().rename("allocation_cpus")
    d = want.groupby(["bucket_start", "name"], sort=False)["cpus"].sum().rename("demand_cpus")
    out = pd.concat([d, a], axis=1).fillna(0.0).reset_index()
    out = out.merge(snapshots, left_on="bucket_start", right_index=True, how="left")
    n = out["snapshots"].to_numpy(dtype=np.float64)
    out["demand_cpus"] = out["demand_cpus"].to_numpy(dtype=np.float64) / n
    out["allocation_cpus"] = out["allocation_cpus"].to_numpy(dtype=np.float64) / n
    out = out.sort_values(["bucket_start", "name"], kind="stable").reset_index(drop=True)
    return equal_shares(out, by=by, bucket_s=bucket_s, fraction=fraction)


def equal_shares(frame: pd.DataFrame, *, by: str, bucket_s: float, fraction: float = 0.0) -> pd.DataFrame:
    """Served part, equal share and starvation (see the module's docstring) of a table of
    means per bucket and credential.

    ``frame`` needs ``bucket_start`` (UNIX seconds, or any clock of ``bucket_s`` steps),
    ``name``, ``demand_cpus`` and ``allocation_cpus`` (cores); ``snapshots`` is kept when
    present. Returns :data:`FAIRNESS_COLUMNS`, ``type`` being ``by``.
    """
    require_columns(frame, ["bucket_start", "name", "demand_cpus", "allocation_cpus"], "shares table")
    alloc = frame["allocation_cpus"].to_numpy(dtype=np.float64)
    want = frame["demand_cpus"].to_numpy(dtype=np.float64)
    active = (alloc > 0) | (want > 0)
    bucket = frame["bucket_start"].to_numpy(dtype=np.float64)
    codes, _ = pd.factorize(bucket, sort=False)
    total = np.bincount(codes, weights=alloc)[codes]
    n_active = np.bincount(codes, weights=active.astype(np.float64))[codes]
    with np.errstate(divide="ignore", invalid="ignore"):
        served = np.where(active, alloc / (alloc + want), np.nan)
        share = np.where(n_active > 0, total / n_active, 0.0)
    frame = frame.assign(
        bucket_end=bucket + bucket_s,
        type=by,
        served=served,
        share_cpus=share,
        starved=(want > 0) & (alloc <= fraction * share) & (total - alloc > 0),
    )
    return frame.reindex(columns=list(FAIRNESS_COLUMNS))


def fairness_by_bucket(shares: pd.DataFrame) -> pd.DataFrame:
    """Per bucket: active credentials, Jain's index of ``served`` and of the allocation, and
    how many credentials were starved.

    ``shares`` needs ``bucket_start``, ``demand_cpus``, ``allocation_cpus``, ``served`` and
    ``starved`` (as :func:`bucket_shares` gives). Returns ``bucket_start``, ``credentials``
    (active: allocated or waiting), ``allocation_cpus``, ``demand_cpus``, ``jain_served``,
    ``jain_allocation`` (NaN where nobody was allocated anything) and ``starved``.
    """
    require_columns(shares, ["bucket_start", "demand_cpus", "allocation_cpus", "served", "starved"], "shares table")
    alloc = shares["allocation_cpus"].to_numpy(dtype=np.float64)
    active = (alloc > 0) | (shares["demand_cpus"].to_numpy(dtype=np.float64) > 0)
    served = np.nan_to_num(shares["served"].to_numpy(dtype=np.float64))
    frame = pd.DataFrame(
        {
            "bucket_start": shares["bucket_start"].to_numpy(dtype=np.float64),
            "credentials": active.astype(np.int64),
            "allocation_cpus": alloc,
            "demand_cpus": shares["demand_cpus"].to_numpy(dtype=np.float64),
            # Jain's index from its sums, so that every bucket is one groupby, not a loop
            "s_sum": np.where(active, served, 0.0),
            "s_sq": np.where(active, served * served, 0.0),
            "a_sum": np.where(active, alloc, 0.0),
            "a_sq": np.where(active, alloc * alloc, 0.0),
            "starved": shares["starved"].to_numpy(dtype=bool).astype(np.int64),
        }
    )
    g = frame.groupby("bucket_start", sort=True).sum()
    n = g["credentials"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        jain_served = np.where(g["s_sq"] > 0, g["s_sum"] ** 2 / (n * g["s_sq"]), np.nan)
        jain_alloc = np.where(g["a_sq"] > 0, g["a_sum"] ** 2 / (n * g["a_sq"]), np.nan)
    return pd.DataFrame(
        {
            "bucket_start": g.index.to_numpy(dtype=np.float64),
            "credentials": g["credentials"].to_numpy(dtype=np.int64),
            "allocation_cpus": g["allocation_cpus"].to_numpy(),
            "demand_cpus": g["demand_cpus"].to_numpy(),
            "jain_served": jain_served,
            "jain_allocation": jain_alloc,
            "starved": g["starved"].to_numpy(dtype=np.int64),
        }
    )


def starvation_intervals(shares: pd.DataFrame, *, bucket_s: float) -> pd.DataFrame:
    """The intervals in which a credential was starved: runs of consecutive starved buckets.

    ``shares`` needs ``bucket_start`` (UNIX seconds), ``name`` and ``starved``; ``type`` if
    present is carried. Returns ``type``, ``name``, ``start``, ``end`` (UNIX seconds),
    ``duration_s`` and ``buckets``, by name and start.
    """
    require_columns(shares, ["bucket_start", "name", "starved"], "shares table")
    hungry = shares.loc[shares["starved"].to_numpy(dtype=bool)]
    kind = hungry["type"] if "type" in hungry.columns else pd.Series(None, index=hungry.index, dtype=object)
    frame = pd.DataFrame(
        {
            "type": kind.to_numpy(dtype=object),
            "name": hungry["name"].astype(str).to_numpy(),
            "start": floats(hungry["bucket_start"]),
        }
    ).sort_values(["name", "start"], kind="stable")
    name = frame["name"].to_numpy()
    start = frame["start"].to_numpy(dtype=np.float64)
    # a new run wherever the credential changes or a bucket is skipped
    new = np.ones(len(frame), dtype=bool)
    new[1:] = (name[1:] != name[:-1]) | (start[1:] - start[:-1] > bucket_s * (1 + 1e-9))
    frame["run"] = np.cumsum(new)
    runs = frame.groupby("run", sort=True).agg(
        type=("type", "first"),
        name=("name", "first"),
        start=("start", "min"),
        last=("start", "max"),
        buckets=("start", "size"),
    )
    end = runs["last"].to_numpy(dtype=np.float64) + bucket_s
    return pd.DataFrame(
        {
            "type": runs["type"].to_numpy(dtype=object),
            "name": runs["name"].to_numpy(dtype=object),
            "start": runs["start"].to_numpy(dtype=np.float64),
            "end": end,
            "duration_s": end - runs["start"].to_numpy(dtype=np.float64),
            "buckets": runs["buckets"].to_numpy(dtype=np.int64),
        }
    )


def starvation_summary(intervals: pd.DataFrame) -> pd.DataFrame:
    """Per credential: ``intervals`` (count), ``starved_s`` (total) and ``longest_s``.

    ``intervals`` needs ``name`` and ``duration_s`` (as :func:`starvation_intervals` gives).
    """
    require_columns(intervals, ["name", "duration_s"], "intervals table")
    g = intervals.groupby("name", sort=True)["duration_s"]
    return pd.DataFrame(
        {
            "name": g.size().index.to_numpy(dtype=object),
            "intervals": g.size().to_numpy(dtype=np.int64),
            "starved_s": g.sum().to_numpy(),
            "longest_s": g.max().to_numpy(),
        }
    )
