"""A snapshot's accounting, computed once: true overhead, phases, histogram, the idle-demand
cross-check and the proportional bills.

The math is in :mod:`probes.accounting` (pure functions over tables); this module feeds it
from the configuration (partitions become canonical units) and from the sources (the exact
cross-check evaluates idle jobs' Requirements against slot ads with classad2). Everything
downstream (the slot and allocation records, the command line's tables) reads the one
:class:`OverheadReport` a snapshot gets, so true overhead is computed once per snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import pandas as pd

from probes.accounting import (
    RESOURCES,
    CanonicalUnit,
    DemandOverlap,
    bill,
    demand_overlap,
    fits_idle,
    overhead_histogram,
    slot_phase,
    true_overhead,
)
from probes.config import Partition, ProbeConfig
from probes.pipeline.matching import fits_idle_exact
from probes.sources.status import Snapshot

__all__ = ["OverheadReport", "account_snapshot", "canonical_units", "overhead_report", "snapshot_bills"]


def canonical_units(partitions: tuple[Partition, ...]) -> dict[str, CanonicalUnit]:
    """The configured partitions as canonical unit definitions."""
    return {p.name: CanonicalUnit(p.name, p.thresholds()) for p in partitions}


@dataclass(frozen=True)
class OverheadReport:
    """``slots``: the slots table with ``overhead_cu``, ``overhead_<r>``, ``overhead_cu_hours``,
    ``unmatched``, ``phase`` and ``fits_idle`` (None without an idle table); ``histogram`` by
    partition, site and phase; ``overlap``: CU-hours of overhead beside fitting idle demand;
    ``nodes`` and ``bills``: the proportional bills (see :func:`probes.accounting.bill`), NaN
    for the nodes flagged ``incomplete`` (and their allocations); ``units``: the definitions it
    was counted in.

    Immutable: ``overlap`` and ``units`` are read-only mappings (copies of what was given). The
    tables are not copied: treat them as read-only (a caller that needs a changed table makes
    its own, e.g. with ``report.slots.assign(...)``).
    """

    slots: pd.DataFrame
    histogram: pd.DataFrame
    overlap: DemandOverlap | None  # a MappingProxyType at run time (3.11's TypedDict has no read-only form)
    nodes: pd.DataFrame
    bills: pd.DataFrame
    units: Mapping[str, CanonicalUnit] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.overlap is not None:
            object.__setattr__(self, "overlap", MappingProxyType(dict(self.overlap)))
        object.__setattr__(self, "units", MappingProxyType(dict(self.units)))

    @property
    def unbilled(self) -> int:
        """Nodes left unbilled because their dynamic slots are not all known."""
        return int(self.nodes["incomplete"].sum())


def account_snapshot(
    snapshot: Snapshot,
    units: Mapping[str, CanonicalUnit],
    idle: pd.DataFrame | None = None,
    *,
    exact: bool = False,
) -> OverheadReport:
    """True overhead of every slot, its phase, whether idle demand fit (with ``idle``), and the
    bills of the running jobs.

    ``exact`` also evaluates the idle jobs' Requirements against the slot ads (and the slots'
    against the jobs) with classad2, for the pairs that fit by resources.
    """
    slots = true_overhead(snapshot.slots, units)
    # a node whose dynamic slots are not all known is not billed (its bills would hand a missing
    # neighbour's share to the jobs that are there); its true overhead still counts
    incomplete = _incomplete(slots)
    billable = slots.assign(overhead_cu=slots["overhead_cu"].mask(incomplete)) if incomplete.any() else slots
    # several instants (dumps taken at different times) are billed instant by instant
    instants = ("observed_at",) if slots["observed_at"].nunique(dropna=False) > 1 else ()
    nodes, bills = bill(billable, snapshot.allocations, units, keys=instants)
    unbilled = set(slots.loc[incomplete, "name"])
    nodes["incomplete"] = incomplete.to_numpy()
    bills["incomplete"] = bills["parent"].isin(unbilled).to_numpy()
    if incomplete.any():  # a node of no partition has no overhead to leave unknown: unbill it here
        _unbill(nodes, bills)
    slots["phase"] = slot_phase(slots)
    overlap = None
    if idle is not None:
        room = _overhead_room(slots, units)
        if exact and snapshot.ads is not None:
            fits = fits_idle_exact(room, list(snapshot.ads), idle)
        else:
            fits = fits_idle(room, idle)
        slots["fits_idle"] = fits
        overlap = demand_overlap(slots, fits)
    else:
        slots["fits_idle"] = None
    histogram = overhead_histogram(slots, by=("partition", "site", "phase"))
    return OverheadReport(slots=slots, histogram=histogram, overlap=overlap, nodes=nodes, bills=bills, units=units)


def overhead_report(
    snapshot: Snapshot, config: ProbeConfig, idle: pd.DataFrame | None = None, *, exact: bool = False
) -> OverheadReport:
    """:func:`account_snapshot` under the configured partitions."""
    return account_snapshot(snapshot, canonical_units(config.partitions), idle, exact=exact)


def snapshot_bills(snapshot: Snapshot, config: ProbeConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Proportional bills of a snapshot: (nodes, bills); see :func:`probes.accounting.bill`."""
    report = overhead_report(snapshot, config)
    return report.nodes, report.bills


def _unbill(nodes: pd.DataFrame, bills: pd.DataFrame) -> None:
    """The rates of the ``incomplete`` nodes, and their jobs' bills of what they hold, made NaN
    (in place: the tables :func:`account_snapshot` just made). A job holding none of a resource
    still owes none of it."""
    flagged = nodes["incomplete"].to_numpy(dtype=bool)
    held = bills["incomplete"].to_numpy(dtype=bool)
    for r in RESOURCES:
        nodes.loc[flagged, f"rate_{r}"] = np.nan
        owes = held & (pd.to_numeric(bills[r]).fillna(0.0).to_numpy(dtype=np.float64) > 0)
        bills.loc[owes, [f"billed_{r}", f"billed_{r}_hours"]] = np.nan


def _incomplete(slots: pd.DataFrame) -> pd.Series:
    if "incomplete" not in slots.columns:
        return pd.Series(False, index=slots.index)
    return slots["incomplete"].fillna(False).astype(bool)


def _overhead_room(slots: pd.DataFrame, units: Mapping[str, CanonicalUnit]) -> pd.DataFrame:
    """The slots with what an idle job may take for the cross-check: Andrijauskas et al. 2023,
    "Defining a canonical unit for accounting purposes" (section 3.1), ask whether jobs "that
    request less than 2 CPUs and 4 GB of memory, i.e. 2 canonical units" were waiting,
    so a resource of the definition offers its true overhead (k units), the others what is
    unallocated. A slot without a partition offers what is unallocated."""
    room = slots.copy()
    for name, unit in units.items():
        rows = (slots["partition"] == name).fillna(False).to_numpy(dtype=bool)
        for r in unit.thresholds:
            room.loc[rows, f"unallocated_{r}"] = slots.loc[rows, f"overhead_{r}"]
    return room
