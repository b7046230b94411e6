"""The idle-job cross-check of true overhead (Andrijauskas et al. 2023, "Defining a canonical
unit for accounting purposes", section 3.1).

Overhead is expected when nothing in the queue could use it. Overhead on a slot where some
idle job would fit points instead at the scheduler or the provisioner (reservations,
defragmentation, throttles, requirements). This module checks the cheap necessary condition:
every requested resource <= the slot's unallocated amount, over distinct requests
(autoclusters), not over jobs. Evaluating each job's ``Requirements`` against the slot ad is
the exact version and needs HTCondor, so it does not live here.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import numpy.typing as npt
import pandas as pd

from probes.accounting._tables import RESOURCES, require_columns

__all__ = ["DemandOverlap", "demand_overlap", "fits_idle", "fitting_pairs"]

# Bounds the slots x requests boolean block of one chunk (bytes, as numpy bools are 1 byte):
# 100,000 slots x 1,000 autoclusters would otherwise be 100 MB per resource.
_CHUNK_CELLS = 1 << 22

# Requests and unallocated amounts are sums of floats (MiB, KiB); a request equal to what
# is left must fit even when the two sums round differently.
_FIT_EPS = 1e-9


def _requests(idle: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Distinct requests of autoclusters with idle jobs, as an (m, len(RESOURCES)) array."""
    columns = [f"request_{r}" for r in RESOURCES]
    require_columns(idle, [*columns, "count"], "idle table")
    count = pd.to_numeric(idle["count"]).to_numpy(dtype=np.float64)
    # NaN count compares False: an autocluster of unknown size is not counted as demand.
    waiting = count > 0
    # A resource not requested is a request of 0, which always fits.
    requests = idle[columns].apply(pd.to_numeric).to_numpy(dtype=np.float64)[waiting]
    requests = np.nan_to_num(requests, nan=0.0)
    return np.unique(requests, axis=0) if len(requests) else requests


def fits_idle(slots: pd.DataFrame, idle: pd.DataFrame) -> pd.Series:
    """Whether some idle request fits entirely in each slot's unallocated resources.

    ``slots`` needs ``unallocated_<r>`` for r in :data:`RESOURCES` (float; cores, MiB, KiB,
    devices). ``idle`` has one row per autocluster of idle jobs with ``request_<r>`` (same
    units; NaN = not requested = 0) and ``count`` (number of idle jobs; rows with count <= 0
    or NaN are ignored).

    Returns a bool Series named ``fits_idle`` on ``slots``' index: True where at least one
    request has ``request_r <= unallocated_r`` for every r. A NaN unallocated amount counts
    as 0 (it never fits a positive request). Partition and canonical unit play no part: this asks whether a
    job could have run, not how much overhead there is.
    """
    unallocated_cols = [f"unallocated_{r}" for r in RESOURCES]
    require_columns(slots, unallocated_cols, "slots table")
    requests = _requests(idle)
    n, m = len(slots), len(requests)
    result = np.zeros(n, dtype=bool)
    if n and m:
        # Unknown (NaN) is taken as nothing free: a slot must not look suspicious on a guess.
        free = np.nan_to_num(slots[unallocated_cols].to_numpy(dtype=np.float64), nan=0.0)
        free = free + _FIT_EPS * np.maximum(1.0, np.abs(free))
        step = max(1, _CHUNK_CELLS // m)
        for start in range(0, n, step):  # chunks of slots, to bound memory; not a row loop
            block = free[start : start + step]
            fits = np.ones((len(block), m), dtype=bool)
            for i in range(len(RESOURCES)):
                # (chunk, 1) vs (1, m): one resource at a time keeps a single bool block alive.
                fits &= requests[None, :, i] <= block[:, i, None]
            result[start : start + step] = fits.any(axis=1)
    return pd.Series(result, index=slots.index, name="fits_idle")


def fitting_pairs(slots: pd.DataFrame, idle: pd.DataFrame) -> pd.DataFrame:
    """The (slot, idle row) pairs where the idle row's request fits the slot's leftovers.

    Same inputs and rules as :func:`fits_idle` (``slots`` needs ``unallocated_<r>``, ``idle``
    needs ``request_<r>`` and ``count``), but per idle row (autocluster), for checks
    that need the job itself (its Requirements). Returns a frame of positions: ``slot``
    (row position in ``slots``) and ``idle`` (row position in ``idle``), int64.
    """
    unallocated_cols = [f"unallocated_{r}" for r in RESOURCES]
    require_columns(slots, unallocated_cols, "slots table")
    columns = [f"request_{r}" for r in RESOURCES]
    require_columns(idle, [*columns, "count"], "idle table")
    waiting = np.flatnonzero(pd.to_numeric(idle["count"]).to_numpy(dtype=np.float64) > 0)
    requests = np.nan_to_num(idle[columns].apply(pd.to_numeric).to_numpy(dtype=np.float64)[waiting], nan=0.0)
    free = np.nan_to_num(slots[unallocated_cols].to_numpy(dtype=np.float64), nan=0.0)
    free = free + _FIT_EPS * np.maximum(1.0, np.abs(free))
    slot_pos, idle_pos = [], []
    m = len(requests)
    if len(free) and m:
        step = max(1, _CHUNK_CELLS // m)
        for start in range(0, len(free), step):
            block = free[start : start + step]
            fits = np.ones((len(block), m), dtype=bool)
            for i in range(len(RESOURCES)):
                fits &= requests[None, :, i] <= block[:, i, None]
            s, j = np.nonzero(fits)
            slot_pos.append(s + start)
            idle_pos.append(waiting[j])
    empty = np.zeros(0, dtype=np.int64)
    return pd.DataFrame(
        {
            "slot": np.concatenate(slot_pos) if slot_pos else empty,
            "idle": np.concatenate(idle_pos) if idle_pos else empty,
        }
    )


class DemandOverlap(TypedDict):
    """What :func:`demand_overlap` returns."""

    suspicious_cu_hours: float
    """CU-hours of overhead on slots where an idle request fit."""
    other_cu_hours: float
    """CU-hours of overhead on slots where no idle request fit (expected overhead)."""
    suspicious_slots: int
    """Slot observations with overhead > 0 where an idle request fit."""
    other_slots: int
    """Slot observations with overhead > 0 where no idle request fit."""
    fitting_without_overhead_slots: int
    """Slot observations with 0 CU of overhead where an idle request still fit (a job
    smaller than a canonical unit in some resource)."""


def demand_overlap(slots_with_overhead: pd.DataFrame, fits: pd.Series) -> DemandOverlap:
    """Split true overhead by whether idle demand could have used it.

    ``slots_with_overhead`` is the output of ``true_overhead`` and needs ``overhead_cu``
    (Int64, CU) and ``overhead_cu_hours`` (float, CU-hours). ``fits`` is the output of
    :func:`fits_idle` on the same table (same index). Unmatched slots (``overhead_cu``
    <NA>) are left out of every figure.
    """
    require_columns(slots_with_overhead, ["overhead_cu", "overhead_cu_hours"], "slots table")
    if not isinstance(fits, pd.Series) or not fits.index.equals(slots_with_overhead.index):
        raise ValueError(
            "fits must be a bool Series on the slots table's index (the output of fits_idle on the same table)"
        )
    if fits.isna().any():
        raise ValueError("fits has missing values; expected True/False for every slot")
    fit = fits.to_numpy(dtype=bool)
    cu = slots_with_overhead["overhead_cu"].astype("Int64")
    known = cu.notna().to_numpy(dtype=bool)
    cu_values = cu.fillna(0).to_numpy(dtype=np.int64)
    positive = known & (cu_values > 0)
    zero = known & (cu_values == 0)
    hours = pd.to_numeric(slots_with_overhead["overhead_cu_hours"]).to_numpy(dtype=np.float64)
    return DemandOverlap(
        suspicious_cu_hours=float(np.nansum(hours[positive & fit])),
        other_cu_hours=float(np.nansum(hours[positive & ~fit])),
        suspicious_slots=int(np.count_nonzero(positive & fit)),
        other_slots=int(np.count_nonzero(positive & ~fit)),
        fitting_without_overhead_slots=int(np.count_nonzero(zero & fit)),
    )
