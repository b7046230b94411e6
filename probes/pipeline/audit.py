"""``fairacct audit``: the store's sums the books are made of, and the books. The submitters'
books and the gaps are :mod:`collector.summaries.audit`'s (the daily summaries show the same);
here are the nodes': slot records by node (amount x ``interval_s`` per resource), allocation
records by ``parent`` (:mod:`probes.accounting.audit` has their math, :mod:`collector.books` the
submitters' and the sampling bound), and the ``gap`` records by node and reason: the time a
node was not billed (missing from the snapshots, unheard, or unobserved: :mod:`probes.pipeline.gaps`),
in node-seconds and in the core-hours it offered and ran when last seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.books import set_open_apart
from collector.errors import ConfigError
from collector.records import iso_utc
from collector.sinks.base import Aggregation, Sink, Total
from collector.summaries.audit import DEFAULT_LAG_S, open_held, submitter_audit
from probes.accounting._tables import RESOURCES
from probes.accounting.audit import node_books
from probes.config import ProbeConfig
from probes.pipeline.overhead import canonical_units

__all__ = ["DEFAULT_LAG_S", "AuditReport", "audit"]


@dataclass(frozen=True)
class AuditReport:
    """The books of ``[start, end)`` (UNIX seconds): per submitter and site (``submitters``),
    per node (``nodes``), the ``gaps`` no snapshot of a pool stands for, the ``node_gaps`` (per
    node and reason: ``gaps``, ``seconds``, ``core_hours`` offered and ``running_core_hours``
    unbilled), the longest snapshot interval ``interval_s`` (0: no snapshot) and the ``lag_s``
    the bound allows; ``open_jobs``: how many jobs still running were set apart (their
    core-hours are the submitters' ``open_core_hours``, when asked for: :func:`audit`)."""

    start: float
    end: float
    interval_s: float
    lag_s: float
    submitters: pd.DataFrame
    nodes: pd.DataFrame
    gaps: pd.DataFrame
    node_gaps: pd.DataFrame
    open_jobs: int = 0

    @property
    def open_core_hours(self) -> float:
        """Core-hours held in the window by the jobs still running, set apart (0 when not asked for)."""
        column = self.submitters.get("open_core_hours")
        return 0.0 if column is None else float(pd.to_numeric(column).sum())

    @property
    def beyond(self) -> int:
        """Submitter and site rows whose difference is beyond the sampling bound."""
        return int(self.submitters["beyond"].sum())

    @property
    def unobserved_core_hours(self) -> float:
        """Core-hours the job records say ran in the gaps (no snapshot stands for them): the
        submitters' ``unobserved_core_hours``, what the books could not check."""
        column = self.submitters.get("unobserved_core_hours")
        return 0.0 if column is None else float(pd.to_numeric(column).sum())

    @property
    def running_unbilled(self) -> float:
        """Core-hours running on nodes when they went unbilled (the sum of ``node_gaps``)."""
        return float(pd.to_numeric(self.node_gaps["running_core_hours"]).sum())

    @property
    def unbalanced(self) -> int:
        """Nodes whose books do not balance (or allocation records naming no node)."""
        return int((~self.nodes["balanced"]).sum())


def _sum(sink: Sink, query: Aggregation) -> pd.DataFrame:
    rows: list[dict[str, Any]] = sink.aggregate(query)
    return pd.DataFrame(rows, columns=list(query.group_by) + [t.name for t in query.totals])


def audit(
    sink: Sink,
    config: ProbeConfig,
    start: float,
    end: float,
    *,
    lag_s: float = DEFAULT_LAG_S,
    set_open: bool = False,
) -> AuditReport:
    """The books of ``[start, end)`` (UNIX seconds, UTC, cut to whole seconds as records are
    dated) from the records in ``sink``. ``set_open``: the core-hours of the jobs still running
    (not in the history yet) set apart, not compared (:func:`collector.books.set_open_apart`)."""
    start, end = float(math.floor(start)), float(math.floor(end))
    if not 0 < start < end:
        raise ConfigError(f"an audit window runs forward, after the epoch: --from {start:g} --to {end:g}")
    reach_s = float(config.pool.max_interval_s)
    books = submitter_audit(sink, start, end, reach_s=reach_s, lag_s=lag_s)
    submitters, open_jobs = books.submitters, 0
    if set_open:
        running = open_held(sink, start, end, reach_s=reach_s)
        submitters, open_jobs = set_open_apart(submitters, running), int(running["job_id"].nunique())
    since, until = _books_window(start, end)
    slot_totals = (
        Total("snapshots"),
        Total("hours", ("interval_s",), 1 / 3600),
        Total("overhead_cu_hours", ("overhead_cu_hours",)),
        *(Total(f"{k}_{r}_hours", (f"{k}_{r}", "interval_s"), 1 / 3600) for r in RESOURCES
          for k in ("total", "unallocated")),
    )  # fmt: skip
    slot_sums = _sum(sink, Aggregation("slot", ("pool", "site", "name", "partition"), slot_totals, None, since, until))
    alloc_totals = tuple(Total(f"allocated_{r}_hours", (r, "interval_s"), 1 / 3600) for r in RESOURCES)
    alloc_sums = _sum(sink, Aggregation("allocation", ("pool", "parent"), alloc_totals, None, since, until))
    gap_totals = (
        Total("gaps"),
        Total("seconds", ("seconds",)),
        Total("core_hours", ("cpus", "seconds"), 1 / 3600),
        Total("running_core_hours", ("running_cpus", "seconds"), 1 / 3600),
    )
    node_gaps = _sum(sink, Aggregation("gap", ("pool", "site", "name", "reason"), gap_totals, None, since, until))

    return AuditReport(
        start=start,
        end=end,
        interval_s=books.interval_s,
        lag_s=lag_s,
        submitters=submitters,
        nodes=node_books(slot_sums, alloc_sums, canonical_units(config.partitions)),
        gaps=books.gaps,
        node_gaps=node_gaps.sort_values(["pool", "name", "reason"], kind="stable").reset_index(drop=True),
        open_jobs=open_jobs,
    )


def _books_window(start: float, end: float) -> tuple[str, str]:
    """``[start, end)`` as the ISO-8601 times the store's queries take."""
    since, until = iso_utc([start, end])
    assert since is not None and until is not None  # after the epoch (checked by audit)
    return since, until
