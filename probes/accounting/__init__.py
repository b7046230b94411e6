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
- :mod:`~probes.accounting.efficiency`: scheduling, job and system efficiency by resource set, drift (seed 001).
- :mod:`~probes.accounting.fairness`: demand vs allocation, Jain's index, starvation (seed 002).
- :mod:`~probes.accounting.lab`: simulators of seed 002's fair-share cases and seed 001's what-if
  (imported on its own: ``import probes.accounting`` does not load it).
"""

from __future__ import annotations

from probes.accounting.billing import bill
from probes.accounting.canonical import RESOURCES, CanonicalUnit, true_overhead
from probes.accounting.efficiency import drift_by, drift_loss, efficiency_table, job_sums, slot_sums
from probes.accounting.fairness import bucket_shares, fairness_by_bucket, jain_index, starvation_intervals
from probes.accounting.fairshare import FairsharePolicy, FairshareResult, Target, decay_weights, fairshare, job_usage
from probes.accounting.fit import DemandOverlap, demand_overlap, fits_idle, fitting_pairs
from probes.accounting.histogram import overhead_histogram, slot_phase
from probes.accounting.machines import class_of_hosts, machine_classes, machines_table, pool_totals
from probes.accounting.penalty import (
    Penalties,
    PenaltyPolicy,
    compare_metrics,
    job_penalties,
    node_requests,
    price_requests,
)

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
    "bucket_shares",
    "class_of_hosts",
    "compare_metrics",
    "decay_weights",
    "demand_overlap",
    "drift_by",
    "drift_loss",
    "efficiency_table",
    "fairness_by_bucket",
    "fairshare",
    "fits_idle",
    "fitting_pairs",
    "jain_index",
    "job_penalties",
    "job_sums",
    "job_usage",
    "machine_classes",
    "machines_table",
    "node_requests",
    "overhead_histogram",
    "pool_totals",
    "price_requests",
    "slot_phase",
    "slot_sums",
    "starvation_intervals",
    "true_overhead",
]
