"""A snapshot's true overhead, histogram, idle-demand cross-check and bills, as one report.

The math is in :mod:`probes.accounting` (pure functions over tables); this module feeds it
from the configuration (partitions become canonical units) and from the sources (the exact
cross-check evaluates idle jobs' Requirements against slot ads with classad2).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from probes.accounting import CanonicalUnit, DemandOverlap, bill, demand_overlap, fits_idle, overhead_histogram, slot_phase, true_overhead
from probes.config import ProbeConfig
from probes.matching import fits_idle_exact
from probes.sources.status import Snapshot

__all__ = ["OverheadReport", "canonical_units", "overhead_report", "snapshot_bills"]


def canonical_units(config: ProbeConfig) -> dict[str, CanonicalUnit]:
    """The configured partitions as canonical unit definitions."""
    return {p.name: CanonicalUnit(p.name, p.thresholds()) for p in config.partitions}


@dataclass
class OverheadReport:
    """``slots``: the slots table with ``overhead_cu``, ``overhead_<r>``, ``overhead_cu_hours``,
    ``unmatched``, ``phase`` and ``fits_idle`` (None without an idle table); ``histogram`` by
    partition, site and phase; ``overlap``: CU-hours of overhead beside fitting idle demand."""

    slots: pd.DataFrame
    histogram: pd.DataFrame
    overlap: DemandOverlap | None


def overhead_report(
    snapshot: Snapshot,
    config: ProbeConfig,
    idle: pd.DataFrame | None = None,
    *,
    exact: bool = False,
) -> OverheadReport:
    """True overhead of every slot, its phase and, with ``idle``, whether idle demand fit.

    ``exact`` also evaluates the idle jobs' Requirements against the slot ads (and the slots'
    against the jobs) with classad2, for the pairs that fit by resources.
    """
    slots = true_overhead(snapshot.slots, canonical_units(config))
    slots["phase"] = slot_phase(slots)
    overlap = None
    if idle is not None:
        room = _overhead_room(slots, config)
        if exact and snapshot.ads is not None:
            fits = fits_idle_exact(room, list(snapshot.ads), idle)
        else:
            fits = fits_idle(room, idle)
        slots["fits_idle"] = fits
        overlap = demand_overlap(slots, fits)
    else:
        slots["fits_idle"] = None
    histogram = overhead_histogram(slots, by=("partition", "site", "phase"))
    return OverheadReport(slots=slots, histogram=histogram, overlap=overlap)


def _overhead_room(slots: pd.DataFrame, config: ProbeConfig) -> pd.DataFrame:
    """The slots with what an idle job may take for the cross-check: seed 003 asks whether
    jobs "that request less than 2 CPUs and 4 GB of memory, i.e. 2 canonical units" were
    waiting, so a resource of the definition offers its true overhead (k units), the others
    what is unallocated. A slot without a partition offers what is unallocated."""
    room = slots.copy()
    for part in config.partitions:
        rows = (slots["partition"] == part.name).fillna(False).to_numpy(dtype=bool)
        for r in part.thresholds():
            room.loc[rows, f"unallocated_{r}"] = slots.loc[rows, f"overhead_{r}"]
    return room


def snapshot_bills(snapshot: Snapshot, config: ProbeConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Proportional bills of a snapshot: (nodes, bills); see :func:`probes.accounting.bill`."""
    units = canonical_units(config)
    return bill(true_overhead(snapshot.slots, units), snapshot.allocations, units)
