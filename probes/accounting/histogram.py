"""Overhead histograms (Andrijauskas et al. 2023, "Defining a canonical unit for accounting
purposes", section 3.1).

Aggregates of true overhead hide *how* it is spread: many slots with one CU each is a
different problem from a few empty glideins. So slots are counted by their overhead in CU,
per partition, site, glidein phase and time bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from probes.accounting._tables import require_columns

__all__ = ["overhead_histogram", "slot_phase"]

PHASES: tuple[str, ...] = ("active", "retiring", "empty")


def slot_phase(slots: pd.DataFrame) -> pd.Series:
    """The glidein phase of every slot: "empty", "retiring" or "active".

    ``slots`` needs:

    - ``n_dynamic`` (int): number of dynamic slots (running jobs) carved from the slot.
    - ``glidein_to_retire`` (float, UNIX seconds UTC): glideinWMS' ``GLIDEIN_ToRetire``;
      NaN when the slot does not publish it.
    - ``observed_at`` (float, UNIX seconds UTC): when the slot was observed.

    "empty" when ``n_dynamic == 0`` (an empty slot is empty whether or not it is retiring:
    its overhead is the whole slot either way); otherwise "retiring" when
    ``glidein_to_retire <= observed_at`` (the glidein takes no new jobs, so its leftovers
    are expected to grow); "active" otherwise. Returns a str Series on ``slots``' index.
    """
    require_columns(slots, ["n_dynamic", "glidein_to_retire", "observed_at"], "slots table")
    n_dynamic = pd.to_numeric(slots["n_dynamic"]).to_numpy(dtype=np.float64)
    to_retire = pd.to_numeric(slots["glidein_to_retire"]).to_numpy(dtype=np.float64)
    observed = pd.to_numeric(slots["observed_at"]).to_numpy(dtype=np.float64)
    # NaN <= x is False, so slots without GLIDEIN_ToRetire are never "retiring".
    phase = np.select([n_dynamic == 0, to_retire <= observed], ["empty", "retiring"], default="active")
    return pd.Series(phase.astype(object), index=slots.index, name="phase")


def overhead_histogram(
    slots_with_overhead: pd.DataFrame,
    by: Sequence[str] = ("partition",),
    bucket_s: int | None = None,
) -> pd.DataFrame:
    """Count slots and CU-hours by their true overhead in canonical units.

    ``slots_with_overhead`` is the output of :func:`~probes.accounting.canonical.true_overhead`;
    it needs ``overhead_cu`` (Int64, CU), ``overhead_cu_hours`` (float, CU-hours), the columns
    named in ``by`` (e.g. ``partition``, ``site``, ``phase``), and ``observed_at`` (UNIX
    seconds) when ``bucket_s`` is given. ``phase`` is computed with :func:`slot_phase` when it
    is asked for and is not already a column.

    Returns one row per (``by``..., [``bucket_start``], ``overhead_cu``) that occurs, sorted
    by those keys, with:

    - ``bucket_start`` (Int64, UNIX seconds): ``observed_at`` floored to a multiple of
      ``bucket_s``; only when ``bucket_s`` is given.
    - ``slots`` (int64): number of slot observations.
    - ``cu_hours`` (float): sum of ``overhead_cu_hours``.

    Slots with no partition are kept as their own rows (missing group keys and
    ``overhead_cu`` are kept as <NA>, not dropped) with ``cu_hours`` NaN: they are counted,
    but their overhead is unknown.
    """
    if isinstance(by, str):
        # A bare "site" would otherwise be iterated as ("s", "i", "t", "e").
        by = (by,)
    keys = list(by)
    if len(set(keys)) != len(keys):
        raise ValueError(f"histogram keys must be distinct, got {keys}")
    reserved = {"overhead_cu", "bucket_start", "slots", "cu_hours"} & set(keys)
    if reserved:
        raise ValueError(f"histogram keys {sorted(reserved)} are output columns; group by other columns")
    if bucket_s is not None and (
        isinstance(bucket_s, bool) or not isinstance(bucket_s, (int, np.integer)) or bucket_s <= 0
    ):
        raise ValueError(f"bucket_s must be a positive integer of seconds, got {bucket_s!r}")

    needed = ["overhead_cu", "overhead_cu_hours"]
    needed += [k for k in keys if k != "phase"]
    if bucket_s is not None:
        needed.append("observed_at")
    require_columns(slots_with_overhead, needed, "slots table")

    frame = pd.DataFrame(
        {k: slots_with_overhead[k] for k in keys if k in slots_with_overhead.columns},
        index=slots_with_overhead.index,
    )
    if "phase" in keys and "phase" not in slots_with_overhead.columns:
        frame["phase"] = slot_phase(slots_with_overhead)
    group_keys = list(keys)
    if bucket_s is not None:
        observed = pd.to_numeric(slots_with_overhead["observed_at"]).to_numpy(dtype=np.float64)
        # floor, not int(): a bucket must not shift for observations before 1970 or at x.5.
        frame["bucket_start"] = pd.array(np.floor(observed / bucket_s) * bucket_s, dtype="Int64")
        group_keys.append("bucket_start")
    frame["overhead_cu"] = slots_with_overhead["overhead_cu"].astype("Int64")
    group_keys.append("overhead_cu")
    frame["_hours"] = pd.to_numeric(slots_with_overhead["overhead_cu_hours"]).astype(np.float64)

    grouped = frame.groupby(group_keys, dropna=False, sort=True, observed=True)["_hours"]
    # Built-in aggregations only (no per-group Python); "count" of non-null hours tells a
    # group of unknown overhead (NaN) from one of zero overhead (0.0).
    result = grouped.agg(["size", "sum", "count"]).reset_index()
    result["slots"] = result["size"].astype(np.int64)
    result["cu_hours"] = result["sum"].where(result["count"] > 0, np.nan).astype(np.float64)
    return result.drop(columns=["size", "sum", "count"])
