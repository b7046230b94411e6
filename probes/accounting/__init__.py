"""The accounting math: pure functions over pandas tables.

No I/O, no clock, no HTCondor: the functions take tables and return new tables, so they run
the same on a live pool's snapshots as on files or workload logs. Units are HTCondor's:
cpus = cores, memory = MiB, disk = KiB, gpus = devices; times are UNIX seconds (UTC) and
durations seconds.

- :mod:`~probes.accounting.canonical`: canonical units and true overhead (seed 003, 3, 4).
- :mod:`~probes.accounting.histogram`: overhead histograms and glidein phases (seed 003, 3.1).
- :mod:`~probes.accounting.fit`: the idle-job cross-check of overhead (seed 003, 3.1).
- :mod:`~probes.accounting.billing`: proportional billing (seed 003, 3.3).
"""

from __future__ import annotations

from probes.accounting.billing import bill
from probes.accounting.canonical import RESOURCES, CanonicalUnit, true_overhead
from probes.accounting.fit import DemandOverlap, demand_overlap, fits_idle, fitting_pairs
from probes.accounting.histogram import overhead_histogram, slot_phase

__all__ = [
    "RESOURCES",
    "CanonicalUnit",
    "DemandOverlap",
    "bill",
    "demand_overlap",
    "fits_idle",
    "fitting_pairs",
    "overhead_histogram",
    "slot_phase",
    "true_overhead",
]
