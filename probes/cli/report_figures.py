"""The report's sections that the probe's analytics compute (seeds 001 and 002): efficiency by
resource set of the stored records (summed in the store), and the fair-share lab's cases.
The collector's report draws them beside its own (:class:`collector.report.Figure`)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from collector.exports import Period
from collector.report import Figure
from collector.report.svg import bar_chart, line_chart
from collector.sinks import Sink
from probes.accounting.lab.simulate import LabRun
from probes.config import ProbeConfig
from probes.errors import SourceError
from probes.pipeline.audit import AuditReport, audit
from probes.pipeline.stored_efficiency import store_efficiency

__all__ = ["audit_figure", "efficiency_figure", "lab_figures", "report_figures"]

# a case's allocation is drawn every few slots: a line of 800 points is no clearer than of 160
_EVERY = 5


def efficiency_figure(frame: pd.DataFrame, by: str) -> Figure:
    """Scheduling, job and system efficiency per set (a table of
    :func:`~probes.pipeline.stored_efficiency.store_efficiency`)."""
    names = frame["set"].astype(str).tolist()
    series = {k: frame[k].astype(float).tolist() for k in ("scheduling", "job", "system")}
    table = frame[
        [
            "set",
            "available_core_s",
            "dedicated_core_s",
            "scheduling",
            "scheduling_cu",
            "jobs",
            "job",
            "system",
            "system_cu",
        ]
    ]
    return Figure(
        f"Efficiency by {by}",
        f"Per {by} (Jackson et al. 2001): scheduling efficiency (core-seconds dedicated to jobs over those available, "
        "from the slot snapshots), job efficiency (CPU time over cores x walltime of the completed jobs) and system "
        "efficiency (their product). Summed in the store.",
        bar_chart(names, series, title=f"efficiency by {by}", unit="ratio (0..1)"),
        table,
    )


def audit_figure(report: AuditReport) -> Figure:
    """The books of the period (``fairacct audit``): per submitter and site, the core-hours held in
    allocation records beside those of the completed jobs, the difference and its sampling bound."""
    books = report.submitters
    names = [f"{s or '(none)'} @ {t or '(none)'}" for s, t in zip(books["submitter"], books["site"], strict=True)]
    series = {k: books[f"{k}_core_hours"].astype(float).tolist() for k in ("held", "used")}
    gaps = ", ".join(
        f"{p or '(all)'} {a:.0f}-{b:.0f} ({s:g} s)"
        for p, a, b, s in zip(report.gaps["pool"], report.gaps["start"], report.gaps["end"], report.gaps["seconds"],
                              strict=True)
    )  # fmt: skip
    return Figure(
        "The books: allocation records against completed jobs",
        f"Per submitter and site, core-hours held in the allocation records (each snapshot standing for its interval) "
        f"against cores x walltime of the completed jobs, both clipped to the period and to the time snapshots "
        f"observed; a difference beyond the sampling bound (cores x (longest snapshot interval {report.interval_s:g} s "
        f"+ {report.lag_s:g} s) summed over the jobs) is a fault of the books: {report.beyond} of {len(books)} rows. "
        f"Nodes out of balance (offered against unallocated plus allocated): {report.unbalanced} of "
        f"{len(report.nodes)}. Gaps (UNIX seconds, no snapshot): {gaps or 'none'}.",
        bar_chart(names, series, title="core-hours held vs used", unit="core-hours"),
        books[
            ["submitter", "site", "jobs", "held_core_hours", "used_core_hours", "difference_core_hours",
             "bound_core_hours", "claimed_core_hours", "beyond"]
        ],
    )  # fmt: skip


def lab_figures(runs: Sequence[LabRun]) -> list[Figure]:
    """Per case of the fair-share lab (Sedighi et al. 2014): each user's nodes over time under the first
    policy run, and the measures of every policy."""
    figures = []
    for case in dict.fromkeys(r.case for r in runs):
        mine = [r for r in runs if r.case == case]
        first = mine[0]
        wide = first.slots.pivot(index="t", columns="user", values="nodes")
        wide = wide[(wide.index - 1) % _EVERY == 0]
        series = {str(u): wide[u].astype(float).tolist() for u in wide.columns}
        table = pd.concat(
            [
                r.users.assign(policy=r.policy, jain_served=r.jain_served, jain_allocation=r.jain_allocation)
                for r in mine
            ],
            ignore_index=True,
        )[
            [
                "policy",
                "user",
                "strategy",
                "completion",
                "starved_slots",
                "longest_starvation",
                "jain_served",
                "jain_allocation",
            ]
        ]
        figures.append(
            Figure(
                f"Lab case {case}: {first.title}",
                f"Nodes per user at every {_EVERY}th time slot under {first.policy}; the table gives each user's "
                f"completion slot and starvation (at most {first.fraction:g} of an equal share) and the case's Jain "
                "indices under every policy.",
                line_chart(
                    [str(t) for t in wide.index],
                    series,
                    title=f"case {case}: nodes per user ({first.policy})",
                    unit="nodes",
                ),
                table,
            )
        )
    return figures


def report_figures(
    sink: Sink, config: ProbeConfig, period: Period, runs: Sequence[LabRun], *, by: str = "site"
) -> list[Figure]:
    """The analytics' sections of the report of ``period``: the books (``fairacct audit``; left
    out when the store holds neither allocation nor job records in the period), efficiency by
    ``by`` (left out when the store holds no slot records in the period) and the lab's ``runs``."""
    figures = []
    start = datetime.fromisoformat(period.since).timestamp()
    books = audit(sink, config, start, datetime.fromisoformat(period.until).timestamp())
    if len(books.submitters):
        figures.append(audit_figure(books))
    with contextlib.suppress(SourceError):  # no slot records: nothing to say of efficiency
        figures.append(
            efficiency_figure(store_efficiency(sink, config, by=by, since=period.since, until=period.until), by)
        )
    return figures + lab_figures(runs)
