"""Proportional billing (Andrijauskas et al. 2023, "Defining a canonical unit for accounting
purposes", section 3.3).

The true overhead of a node is the provider's loss: it is never billed. Everything else on
the node is shared by the jobs running there in proportion to what each was allocated, per
resource:

    billable_r = total_r - overhead_cu * threshold_r     (threshold_r = 0 outside the definition)
    rate_r     = billable_r / allocated_r                (allocated_r = sum over the node's jobs)
    billed_j,r = alloc_j,r * rate_r

A resource nobody on the node was allocated (allocated_r == 0) bills nobody; its billable
amount is reported as ``unattributed_r``. Per node and resource, the bills, the unattributed
amount and the overhead add up to the node's total.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import RESOURCES, require_columns
from probes.accounting.canonical import CanonicalUnit, row_thresholds

__all__ = ["bill"]


def _slot_index(slots: pd.DataFrame, keys: list[str]) -> pd.Index:
    if keys:
        index: pd.Index = pd.MultiIndex.from_frame(slots[["name", *keys]])
    else:
        index = pd.Index(slots["name"])
    if not index.is_unique:
        dupes = index[index.duplicated()].unique()[:5].tolist()
        raise ValueError(
            f"slots table has {index.duplicated().sum()} repeated slot keys {['name', *keys]}, "
            f"e.g. {dupes}; bill one snapshot at a time or pass keys=('observed_at',) "
            "(and 'pool') so that every slot is named once"
        )
    return index


def _parent_positions(allocations: pd.DataFrame, index: pd.Index, keys: list[str]) -> npt.NDArray[np.int64]:
    if keys:
        wanted: pd.Index = pd.MultiIndex.from_frame(allocations[["parent", *keys]].set_axis(["name", *keys], axis=1))
    else:
        wanted = pd.Index(allocations["parent"])
    return np.asarray(index.get_indexer(wanted), dtype=np.int64)


def bill(
    slots_with_overhead: pd.DataFrame,
    allocations: pd.DataFrame,
    units: Mapping[str, CanonicalUnit],
    *,
    keys: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Bill each allocation its share of its node, leaving the true overhead to the provider.

    ``slots_with_overhead`` (the output of ``true_overhead``), one row per node, needs:

    - ``name`` (str): the partitionable slot's name, what allocations point at.
    - ``partition`` (str or None) and ``overhead_cu`` (Int64, CU); the overhead amount of
      resource r is ``overhead_cu * units[partition].threshold(r)``.
    - ``total_<r>`` for r in :data:`RESOURCES` (float; cores, MiB, KiB, devices).

    ``allocations``, one row per dynamic slot (running job), needs ``parent`` (the slot's
    ``name``), ``name``, ``job_id``, ``user``, ``<r>`` for r in :data:`RESOURCES` (the
    allocation, same units; NaN = 0; never negative) and ``interval_s`` (seconds).

    ``keys`` names further columns present in both tables that, with the name, identify a
    slot (e.g. ``("pool", "observed_at")`` to bill several snapshots at once). Slot keys must
    be unique.

    A slot with no partition (``partition`` missing) has no definition, so no resource is
    overhead (every threshold is 0) and its whole total is billable; ``unmatched`` marks it.
    A matched slot whose ``overhead_cu`` is <NA> (unknown) gets NaN billable amounts, rates
    and bills.

    Returns ``(nodes, bills)``:

    - ``nodes``: one row per slot, in the slots table's order: ``name``, the ``keys``,
      ``partition``, ``unmatched`` (bool), ``overhead_cu`` (Int64), ``n_allocations``
      (int64), and for each r: ``total_<r>``, ``overhead_<r>``, ``allocated_<r>`` (sum of the
      node's allocations), ``billable_<r>``, ``rate_<r>`` (``billable_r / allocated_r``, NaN
      when ``allocated_r == 0``), ``unattributed_<r>`` (``billable_r`` when
      ``allocated_r == 0``, else 0).
    - ``bills``: a copy of ``allocations`` (same index and order) with ``billed_<r>``
      (``alloc_r * rate_r``; 0 where ``alloc_r == 0``), ``billed_<r>_hours``
      (``billed_r * interval_s / 3600``, resource-hours) and ``orphan`` (bool: the parent is
      not in the slots table; its bills are NaN).
    """
    key_list = [keys] if isinstance(keys, str) else list(keys)
    require_columns(
        slots_with_overhead,
        ["name", "partition", "overhead_cu", *[f"total_{r}" for r in RESOURCES], *key_list],
        "slots table",
    )
    require_columns(
        allocations,
        ["parent", "name", "job_id", "user", *RESOURCES, "interval_s", *key_list],
        "allocations table",
    )
    slots = slots_with_overhead
    n_slots = len(slots)

    thresholds, unmatched = row_thresholds(slots["partition"], units, "slots table")
    cu = slots["overhead_cu"].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
    # Unmatched slots have all-zero thresholds, so their overhead amount is 0, not unknown.
    cu = np.where(unmatched, 0.0, cu)
    total = slots[[f"total_{r}" for r in RESOURCES]].to_numpy(dtype=np.float64)
    overhead = cu[:, None] * thresholds
    billable = total - overhead

    amounts = _amounts(allocations)

    positions = _parent_positions(allocations, _slot_index(slots, key_list), key_list)
    orphan = positions < 0
    owned = ~orphan
    owner = positions[owned]

    allocated = np.empty_like(total)
    for i in range(len(RESOURCES)):  # per resource, each a single bincount over all rows
        allocated[:, i] = np.bincount(owner, weights=amounts[owned, i], minlength=n_slots)
    n_allocations = np.bincount(owner, minlength=n_slots).astype(np.int64)

    held = allocated > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = np.where(held, billable / allocated, np.nan)
    unattributed = np.where(held, 0.0, billable)

    node_columns: dict[str, object] = {"name": slots["name"].to_numpy()}
    for k in key_list:
        node_columns[k] = slots[k].to_numpy()
    node_columns["partition"] = slots["partition"].to_numpy()
    node_columns["unmatched"] = unmatched
    node_columns["overhead_cu"] = slots["overhead_cu"].astype("Int64").array
    node_columns["n_allocations"] = n_allocations
    for i, r in enumerate(RESOURCES):
        node_columns[f"total_{r}"] = total[:, i]
        node_columns[f"overhead_{r}"] = overhead[:, i]
        node_columns[f"allocated_{r}"] = allocated[:, i]
        node_columns[f"billable_{r}"] = billable[:, i]
        node_columns[f"rate_{r}"] = rate[:, i]
        node_columns[f"unattributed_{r}"] = unattributed[:, i]
    nodes = pd.DataFrame(node_columns, index=slots.index)

    return nodes, _bills(allocations, amounts, positions, billable, allocated)


def _amounts(allocations: pd.DataFrame) -> np.ndarray:
    """The allocations' amounts of each resource (rows x :data:`RESOURCES`, NaN as 0); a
    negative amount is refused."""
    amounts = np.nan_to_num(allocations[list(RESOURCES)].apply(pd.to_numeric).to_numpy(dtype=np.float64), nan=0.0)
    if (amounts < 0).any():
        bad = allocations.loc[(amounts < 0).any(axis=1), "name"].head(5).tolist()
        raise ValueError(
            f"allocations table has negative resource amounts (e.g. dynamic slots {bad}); "
            "an allocation holds 0 or more of each resource"
        )
    out: np.ndarray = amounts
    return out


def _bills(
    allocations: pd.DataFrame, amounts: np.ndarray, positions: np.ndarray, billable: np.ndarray, allocated: np.ndarray
) -> pd.DataFrame:
    """``allocations`` with their ``billed_<r>``, ``billed_<r>_hours`` and ``orphan`` columns (see
    :func:`bill`): each holds ``amounts`` of its node (its row of ``billable`` and ``allocated``,
    at ``positions``; -1 for an orphan)."""
    orphan = positions < 0
    # Orphans look up a row of NaN appended after the last slot.
    row = np.where(orphan, len(billable), positions)
    nan_row = np.full((1, len(RESOURCES)), np.nan)
    billable_rows = np.vstack([billable, nan_row])[row]
    allocated_rows = np.vstack([allocated, nan_row])[row]
    interval = pd.to_numeric(allocations["interval_s"]).to_numpy(dtype=np.float64)
    bills = allocations.copy()
    for i, r in enumerate(RESOURCES):
        # billable * (alloc / allocated) is alloc * rate computed through the job's share
        # (<= 1), which cannot overflow when a node's allocated total is tiny. A job holding
        # none of r owes none of it, even where the rate is undefined.
        with np.errstate(divide="ignore", invalid="ignore"):
            share = amounts[:, i] / allocated_rows[:, i]
            billed = np.where(amounts[:, i] == 0, 0.0, billable_rows[:, i] * share)
        billed[orphan] = np.nan
        bills[f"billed_{r}"] = billed
        bills[f"billed_{r}_hours"] = billed * interval / 3600.0
    bills["orphan"] = orphan
    return bills
