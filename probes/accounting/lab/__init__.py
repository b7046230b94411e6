"""The lab: small, fast simulators of the two papers that have no pool to measure (cited in full
in :mod:`probes.accounting`'s References).

- :mod:`~probes.accounting.lab.loads`: the submission strategies S1..S8 and cases of Sedighi et al.
  2014, "Fairness of task scheduling in high performance computing environments".
- :mod:`~probes.accounting.lab.share`: how a slot's nodes are shared: formula 2.1, Maui's fairshare.
- :mod:`~probes.accounting.lab.simulate`: the cases under each policy, Table 2.1, starvation.
- :mod:`~probes.accounting.lab.whatif`: the node-allocation policies of Jackson et al. 2001, "Improving
  cluster utilization through set based allocation policies", on a heterogeneous cluster.
"""

from __future__ import annotations

from probes.accounting.lab.loads import CASES, STRATEGIES, Case, case_loads, strategy_load
from probes.accounting.lab.share import MauiFairshare, QueueProportional, proportional_shares
from probes.accounting.lab.simulate import POLICIES, LabRun, run_case, run_lab, simulate, table_2_1
from probes.accounting.lab.whatif import WHATIF_POLICIES, WhatIf, emulate, generate_cluster, generate_workload, whatif

__all__ = [
    "CASES",
    "POLICIES",
    "STRATEGIES",
    "WHATIF_POLICIES",
    "Case",
    "LabRun",
    "MauiFairshare",
    "QueueProportional",
    "WhatIf",
    "case_loads",
    "emulate",
    "generate_cluster",
    "generate_workload",
    "proportional_shares",
    "run_case",
    "run_lab",
    "simulate",
    "strategy_load",
    "table_2_1",
    "whatif",
]
