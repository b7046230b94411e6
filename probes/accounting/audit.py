"""A node's books balance: what each node offered against its true overhead and its
allocations, in canonical units (Andrijauskas et al. 2023). The submitters' books and the
sampling bound are :mod:`collector.books`'s; :mod:`probes.pipeline.audit` asks the store for both.

**A node's books.** Per node (partitionable or static slot) over the snapshots of the window,
for each resource ``r``: what it offered (``total_r``) is what was unallocated on it (its slot
records) plus what its allocations held (the allocation records that name it): exactly, since
the slot's unallocated amounts are its total minus its dynamic slots, the very ones the
allocation records are made of. In canonical units (Andrijauskas et al. 2023): offered CU-hours
(``min over r of floor(total_r / threshold_r)``, what the node would offer empty), true
overhead CU-hours, and allocated CU-hours (``max over r of allocated_r / threshold_r``: the
units the jobs' largest dimension took); the difference is the books' error per resource in
units of its threshold, the largest, in CU-hours; 0 when they balance.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from probes.accounting._tables import RESOURCES, require_columns
from probes.accounting.canonical import CanonicalUnit

__all__ = ["node_books"]


def node_books(slots: pd.DataFrame, allocations: pd.DataFrame, units: Mapping[str, CanonicalUnit]) -> pd.DataFrame:
    """Each node's books over the window (see the module docstring).

    ``slots``: the slot records summed by node (``pool``, ``site``, ``name``, ``partition``):
    ``snapshots``, ``hours`` (sum of ``interval_s`` / 3600), ``overhead_cu_hours``, and for each
    resource r ``total_<r>_hours`` and ``unallocated_<r>_hours`` (sums of the amount x
    ``interval_s`` / 3600). ``allocations``: the allocation records summed by node (``pool``,
    ``parent``): ``allocated_<r>_hours``. ``units``: the canonical units by partition.

    Returns per node: ``pool``, ``site``, ``name``, ``partition``, ``snapshots``,
    ``offered_cu_hours``, ``overhead_cu_hours``, ``allocated_cu_hours``, ``difference_cu_hours``
    (the largest ``|offered_r - unallocated_r - allocated_r| / threshold_r`` over the partition's
    resources; for a node of no partition, in cores), ``balanced`` (under 1e-6 CU-hours or
    relative), ``orphan`` (allocation records name a node no slot record of the window has)."""
    sums = [f"{k}_{r}_hours" for r in RESOURCES for k in ("total", "unallocated")]
    require_columns(
        slots, ["pool", "site", "name", "partition", "snapshots", "hours", "overhead_cu_hours", *sums], "slot sums"
    )
    require_columns(allocations, ["pool", "parent", *[f"allocated_{r}_hours" for r in RESOURCES]], "allocation sums")
    allocs = allocations.rename(columns={"parent": "name"})
    books = slots.merge(allocs, on=["pool", "name"], how="outer", indicator=True)
    books["orphan"] = books["_merge"].eq("right_only")
    n = len(books)
    hours = pd.to_numeric(books["hours"]).astype(float).fillna(0.0).to_numpy()
    offered = np.full(n, np.nan)
    allocated = np.zeros(n)
    diff = np.zeros(n)
    scale = np.zeros(n)
    partitions = books["partition"].astype(object).to_numpy()
    for r in RESOURCES:
        total = pd.to_numeric(books[f"total_{r}_hours"]).astype(float).fillna(0.0).to_numpy()
        free = pd.to_numeric(books[f"unallocated_{r}_hours"]).astype(float).fillna(0.0).to_numpy()
        held = pd.to_numeric(books[f"allocated_{r}_hours"]).astype(float).fillna(0.0).to_numpy()
        thr = np.array(
            [units[p].threshold(r) if isinstance(p, str) and p in units else (1.0 if r == "cpus" else 0.0)
             for p in partitions]
        )  # fmt: skip
        use = thr > 0
        if not use.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            per_hour = np.where(hours > 0, total / np.where(hours > 0, hours, 1.0), 0.0)
            cu = np.where(use, np.floor(per_hour / np.where(use, thr, 1.0) + 1e-9), np.inf)
            offered = np.where(use, np.fmin(offered, cu * hours), offered)
            allocated = np.where(use, np.maximum(allocated, held / np.where(use, thr, 1.0)), allocated)
            err = np.where(use, np.abs(total - free - held) / np.where(use, thr, 1.0), 0.0)
            diff = np.maximum(diff, err)
            scale = np.maximum(scale, np.where(use, total / np.where(use, thr, 1.0), 0.0))
    matched = np.array([isinstance(p, str) and p in units for p in partitions])
    out = pd.DataFrame(
        {
            "pool": books["pool"],
            "site": books["site"],
            "name": books["name"],
            "partition": books["partition"],
            "snapshots": pd.to_numeric(books["snapshots"]).fillna(0).astype(np.int64),
            "offered_cu_hours": np.where(matched, offered, np.nan),
            "overhead_cu_hours": pd.to_numeric(books["overhead_cu_hours"]).astype(float),
            "allocated_cu_hours": np.where(matched, allocated, np.nan),
            "difference_cu_hours": diff,
        }
    )
    out["orphan"] = books["orphan"].to_numpy()
    out["balanced"] = (diff <= 1e-6 + 1e-9 * scale) & ~out["orphan"]
    return out.sort_values(["pool", "name"], key=_text_key).reset_index(drop=True)


def _text_key(column: pd.Series) -> pd.Series:
    """Sort names as text, a missing one first."""
    return column.map(lambda v: "" if v is None or v != v else str(v))
