"""The accounting math: pure functions over pandas tables.

No I/O, no clock, no HTCondor: the functions take tables and return new tables, so they run
the same on a live pool's snapshots as on files or workload logs. Units are HTCondor's:
cpus = cores, memory = MiB, disk = KiB, gpus = devices; times are UNIX seconds (UTC) and
durations seconds.

- :mod:`~probes.accounting.canonical`: canonical units and true overhead (Andrijauskas et al. 2023, sections 3, 4).
- :mod:`~probes.accounting.histogram`: overhead histograms and glidein phases (Andrijauskas et al. 2023, 3.1).
- :mod:`~probes.accounting.fit`: the idle-job cross-check of overhead (Andrijauskas et al. 2023, 3.1).
- :mod:`~probes.accounting.billing`: proportional billing (Andrijauskas et al. 2023, 3.3).
- :mod:`~probes.accounting.machines`: the machine classes penalties are priced against.
- :mod:`~probes.accounting.pricing`: a node request's price on the machine classes that fit it
  (Klusáček & Rudová 2015, formula 7).
- :mod:`~probes.accounting.penalty`: the multi-resource penalty and the metrics it replaces
  (Klusáček & Rudová 2015, section 3).
- :mod:`~probes.accounting.fairshare`: Maui-style fairshare windows, decay and targets (Maui Admin Guide, 6.3).
- :mod:`~probes.accounting.efficiency`: scheduling, job and system efficiency by resource set, drift
  (Jackson et al. 2001).
- :mod:`~probes.accounting.fairness`: demand vs allocation, Jain's index, starvation (Sedighi et al. 2014).
- :mod:`~probes.accounting.lab`: simulators of Sedighi et al. 2014's fair-share cases and of Jackson et al.
  2001's what-if (imported on its own: ``import probes.accounting`` does not load it).

References
----------
The papers the accounting follows. The code, its help texts and the collector cite them by the
short form before the colon, with the paper's own section, formula, table or example numbers.

- Andrijauskas et al. 2023: Fabio Andrijauskas, Igor Sfiligoi and Frank Würthwein, "Defining a
  canonical unit for accounting purposes", PEARC '23: Practice and Experience in Advanced
  Research Computing, ACM, 2023, pp. 288-291 (arXiv:2305.10551). Canonical units, true
  overhead, overhead histograms, the idle-job cross-check, proportional billing.
- Klusáček & Rudová 2015 ("Klusacek & Rudova 2015" where a terminal prints it): Dalibor
  Klusáček and Hana Rudová, "Multi-resource aware fairsharing for heterogeneous systems", Job
  Scheduling Strategies for Parallel Processing (JSSPP 2014), LNCS 8828, Springer, 2015. The
  multi-resource penalty: the processor equivalent of a job on one machine, the minimum over the
  machines that could run it, the sum over a multi-node job's nodes, queue and node costs, SPEC
  walltime normalization (formulas 4-9); the CPU-only, standard-job and global
  processor-equivalent metrics it replaces (formulas 1-3).
- Maui Admin Guide: Adaptive Computing, "Maui Scheduler Administrator's Guide", section 6.3
  "Fairshare". FSINTERVAL, FSDEPTH, FSDECAY, FSPOLICY, targets, floors and caps, the
  ``FS.<epoch>`` files, ``diagnose -f``.
- Jackson et al. 2001: David B. Jackson, Brian D. Haymore, Julio C. Facelli and Quinn O. Snell,
  "Improving cluster utilization through set based allocation policies", International
  Conference on Parallel Processing Workshops, 2001. Resource sets and hardware drift;
  scheduling, job and system efficiency; a parallel job runs at the pace of its slowest node.
- Sedighi et al. 2014: Art Sedighi, Yuefan Deng and Peng Zhang, "Fairness of task scheduling in
  high performance computing environments", Scalable Computing: Practice and Experience 15(3),
  2014, pp. 273-288. How a queue-proportional fair share (formula 2.1) can be gamed: submission
  strategies S1-S8, cases, temporal starvation.
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
