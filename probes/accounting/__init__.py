"""The accounting math: pure functions over pandas tables.

No I/O, no clock, no HTCondor: the functions take tables and return new tables, so they run
the same on a live pool's snapshots as on files or workload logs. Units are HTCondor's:
cpus = cores, memory = MiB, disk = KiB, gpus = devices; times are UNIX seconds (UTC) and
durations seconds.

- :mod:`~probes.accounting.canonical`: canonical units and true overhead (seed 003, 3, 4).
- :mod:`~probes.accounting.histogram`: overhead histograms and glidein phases (seed 003, 3.1).
- :mod:`~probes.accounting.fit`: the idle-job cross-check of overhead (seed 003, 3.1).
- :mod:`~probes.accounting.billing`: proportional billing (seed 003, 3.3).
- :mod:`~probes.accounting.machines`: the machine classes penalties are priced against.
- :mod:`~probes.accounting.penalty`: the multi-resource penalty and the metrics it replaces (seed 000, 3).
- :mod:`~probes.accounting.fairshare`: Maui-style fairshare windows, decay and targets (seed 004, 6.3).
"""

from __future__ import annotations

from probes.accounting.billing import bill
from probes.accounting.canonical import RESOURCES, CanonicalUnit, true_overhead
from probes.accounting.fairshare import FairsharePolicy, FairshareResult, Target, decay_weights, fairshare, job_usage
from probes.accounting.fit import DemandOverlap, demand_overlap, fits_idle, fitting_pairs
from probes.accounting.histogram import overhead_histogram, slot_phase
from probes.accounting.machines import class_of_hosts, machine_classes, machines_table, pool_totals
from probes.accounting.penalty import Penalties, PenaltyPolicy, compare_metrics, job_penalties, node_requests, price_requests

__all__ = [
    "RESOURCES",
    "CanonicalUnit",
    "DemandOverlap",
    "FairsharePolicy",
    "FairshareResult",
    "Penalties",
    "PenaltyPolicy",
    "Target",
    "bill",
    "class_of_hosts",
    "compare_metrics",
    "decay_weights",
    "demand_overlap",
    "fairshare",
    "fits_idle",
    "fitting_pairs",
    "job_penalties",
    "job_usage",
    "machine_classes",
    "machines_table",
    "node_requests",
    "overhead_histogram",
    "pool_totals",
    "price_requests",
    "slot_phase",
    "true_overhead",
]
