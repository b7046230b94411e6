"""The report's sections that the probe's analytics compute (seeds 001 and 002): efficiency by
resource set of the stored records (summed in the store), and the fair-share lab's cases.
The collector's report draws them beside its own (:class:`collector.report.Figure`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from collector.books import unobserved_only
from collector.exports import Period
from collector.readable import duration, utc_time
from collector.report import Figure
from collector.report.svg import bar_chart, line_chart
from collector.sinks import Sink
from collector.sinks.base import Aggregation, Total
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
    :func:`~probes.pipeline.stored_efficiency.store_efficiency`; its core-seconds shown as core-hours)."""
    # a set with no efficiency to show (the site of a job without one, which ran no core-second) is left out
    ratios = frame[["scheduling", "job", "system"]].apply(pd.to_numeric, errors="coerce").fillna(0.0)
    frame = frame.loc[(ratios > 0).any(axis=1)]
    names = frame["set"].astype(str).tolist()
    series = {k: frame[k].astype(float).tolist() for k in ("scheduling", "job", "system")}
    # core-hours, as the rest of the page: a reader does not take in 1,728,000 core-seconds
    hours = {f"{k}_core_hours": frame[f"{k}_core_s"].astype(float) / 3600.0 for k in ("available", "dedicated")}
    table = frame.assign(**hours)[
        [
            "set",
            "available_core_hours",
            "dedicated_core_hours",
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


def audit_figure(report: AuditReport, history_jobs: int = 0) -> Figure:
    """The books of the period (``fairacct audit``): per submitter and site, the core-hours held in
    allocation records beside those of the completed jobs, the difference and its sampling bound,
    with the core-hours of the jobs still running set apart; and a verdict that says why: a fault,
    a balance, or a balance of nothing (no completed job ran in the observed time; ``history_jobs``:
    the job records of the period, wherever they ran)."""
    lost = _lost_sentence(report)
    books = report.submitters[~unobserved_only(report.submitters)].reset_index(drop=True)
    report = dataclasses.replace(report, submitters=books)  # the rows compared; the loss in the gaps in words
    submitters, domain = _common_domain([s or "(none)" for s in books["submitter"]])
    names = [f"{s} @ {t or '(none)'}" for s, t in zip(submitters, books["site"], strict=True)]
    kinds = {"held": "held", "used": "used"} | ({"open": "running"} if "open_core_hours" in books else {})
    series = {label: books[f"{k}_core_hours"].astype(float).tolist() for k, label in kinds.items()}
    columns = ["submitter", "site", "jobs", "held_core_hours", "used_core_hours", "difference_core_hours",
               "bound_core_hours", "claimed_core_hours", *(["open_core_hours"] if "open" in kinds else []),
               "beyond"]  # fmt: skip
    return Figure(
        "The books: allocation records against completed jobs",
        f"{_verdict(report, history_jobs)} Per submitter and site: core-hours held in the allocation records "
        "against cores x walltime of the completed jobs.",
        bar_chart(names, series, title=f"core-hours held vs used{f' (submitters @{domain})' if domain else ''}",
                  unit="core-hours"),
        books[columns],
        "Nothing to draw: no core-hour was held or used in this period.",
        more=f"Each snapshot stands for its interval; both sides are clipped to the period and to the time "
        f"snapshots observed; a difference beyond the sampling bound (cores x (longest snapshot interval "
        f"{duration(report.interval_s)} + {duration(report.lag_s)}) summed over the jobs) is a fault of the books. "
        f"Nodes out of balance (offered against unallocated plus allocated): {report.unbalanced} of "
        f"{len(report.nodes)}. {_gaps_sentence(report)}{lost}",
    )  # fmt: skip


def _common_domain(submitters: Sequence[str]) -> tuple[list[str], str]:
    """The submitters without the ``@domain`` they all share (a plot's labels have no room to
    repeat it), and that domain ("" when they do not share one)."""
    domains = {s.rpartition("@")[2] for s in submitters if "@" in s}
    if len(domains) != 1 or not all("@" in s for s in submitters):
        return list(submitters), ""
    return [s.rpartition("@")[0] for s in submitters], domains.pop()


def _verdict(report: AuditReport, history_jobs: int) -> str:
    """What the books say, and why, in a few sentences."""
    rows = len(report.submitters)
    if report.beyond:
        said = (
            f"A fault of the books: {report.beyond} of {rows} rows differ beyond their bound (a job billed that did "
            "not run or while it waited, a job that ran unbilled, records lost or doubled)."
        )
    else:
        said = f"The books balance: 0 of {rows} rows beyond their bound."
    if report.open_jobs:
        said += (
            f" No fault in the {report.open_core_hours:.4g} core-hours held by the {report.open_jobs} jobs still "
            "running at the newest snapshot: the history holds a job once it has left the queue, so they are set "
            "apart, not compared."
        )
    compared = int(pd.to_numeric(report.submitters["jobs"]).sum())
    if not compared:
        observed = report.end - report.start - _gap_seconds(report)
        said += (
            f" No completed job ran in the time the snapshots observed ({duration(observed)} of the period's "
            f"{duration(report.end - report.start)}), so the balance compares nothing"
            + (f": the history's {history_jobs} jobs of the period ran in the gaps." if history_jobs else ".")
        )
    return said


def _lost_sentence(report: AuditReport) -> str:
    """What the job records say ran in the gaps, per submitter and site: the loss a gap hides."""
    if report.unobserved_core_hours <= 0:
        return ""
    rows = report.submitters[report.submitters["unobserved_core_hours"] > 0]
    rows = rows.sort_values("unobserved_core_hours", ascending=False, kind="stable")
    named = "; ".join(
        f"{s or '(none)'} @ {t or '(none)'} {h:.4g} core-hours"
        for s, t, h in zip(rows["submitter"][:10], rows["site"][:10], rows["unobserved_core_hours"][:10], strict=True)
    ) + (f"; and {len(rows) - 10} more rows" if len(rows) > 10 else "")
    return f" Ran in the gaps, unchecked (the job records' core-hours there, the largest first): {named}."


def _gap_seconds(report: AuditReport) -> float:
    """The unobserved seconds of the window: of the pool with the most (one pool, the demo's: its gaps)."""
    per_pool = report.gaps.groupby(report.gaps["pool"].astype(str), sort=False)["seconds"].sum()
    return float(per_pool.max()) if len(per_pool) else 0.0


def _gaps_sentence(report: AuditReport) -> str:
    g = report.gaps
    if not len(g):
        return "Gaps (time no snapshot stands for): none."
    said = "; ".join(
        f"{p or 'every pool'} {utc_time(a)} to {utc_time(b)} ({duration(s)})"
        for p, a, b, s in zip(g["pool"], g["start"], g["end"], g["seconds"], strict=True)
    )
    return f"Gaps (time no snapshot stands for: the probe or the collector was down, or not yet run): {said}."


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
    """The analytics' sections of the report of ``period``: the books (``fairacct audit``, the jobs
    still running set apart; left out when the store holds neither allocation nor job records in
    the period), efficiency by ``by`` (left out when the store holds no slot records in the
    period) and the lab's ``runs``."""
    figures = []
    start = datetime.fromisoformat(period.since).timestamp()
    books = audit(sink, config, start, datetime.fromisoformat(period.until).timestamp(), set_open=True)
    if len(books.submitters):
        jobs = sink.aggregate(Aggregation("job", (), (Total("jobs"),), None, period.since, period.until))
        figures.append(audit_figure(books, int(jobs[0]["jobs"]) if jobs else 0))
    with contextlib.suppress(SourceError):  # no slot records: nothing to say of efficiency
        figures.append(
            efficiency_figure(store_efficiency(sink, config, by=by, since=period.since, until=period.until), by)
        )
    return figures + lab_figures(runs)
