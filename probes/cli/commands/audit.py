"""``fairacct audit --from T --to T``: the books of a window, from the store
(:mod:`probes.pipeline.audit`; the math and the sampling bound in :mod:`probes.accounting.audit`).

The JSON shape is a contract: ``{"from", "to" (ISO-8601 UTC), "interval_s", "lag_s",
"balanced" (no difference beyond the bound, no node out of balance, no gap, no running core
unbilled in a node gap), "gaps": [{"pool", "start", "end", "seconds"}], "node_gaps": [{"pool",
"site", "name", "reason" (missing, unheard, unobserved), "gaps", "seconds", "core_hours",
"running_core_hours"}], "submitters": [{"submitter", "site", "held_core_hours",
"claimed_core_hours", "used_core_hours", "difference_core_hours", "bound_core_hours", "jobs",
"runs", "beyond", "unobserved_core_hours", "unobserved_jobs" (what the job records say ran in the
gaps: the loss a gap may hide, each job once)}], "nodes": [{"pool", "site", "name", "partition",
"snapshots", "offered_cu_hours", "overhead_cu_hours", "allocated_cu_hours", "difference_cu_hours",
"orphan", "balanced"}]}``;
keys are added, never renamed or removed.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from probes.cli.common import EXIT_OK, opened_store
from probes.cli.options import add_options

if TYPE_CHECKING:
    import pandas as pd

    from probes.cli.views import Section
    from probes.config import ProbeConfig
    from probes.pipeline.audit import AuditReport

__all__ = ["HELP", "add_arguments", "audit_json", "audit_sections", "run"]

HELP = "the books balance: allocation records against completed jobs, node books, gaps, within the sampling bound"

NODES_SHOWN = 20  # nodes in the table, those out of balance first (--limit); --json has them all
_SUBMITTER_VIEW = (
    "submitter", "site", "jobs", "runs", "held_core_hours", "used_core_hours", "difference_core_hours",
    "bound_core_hours", "claimed_core_hours", "beyond", "unobserved_jobs", "unobserved_core_hours",
)  # fmt: skip
_GAP_VIEW = ("pool", "start", "end", "seconds")
_NODE_GAP_VIEW = ("pool", "name", "reason", "gaps", "seconds", "core_hours", "running_core_hours")
_NODE_VIEW = (
    "pool", "name", "partition", "snapshots", "offered_cu_hours", "overhead_cu_hours", "allocated_cu_hours",
    "difference_cu_hours", "balanced",
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``audit``'s options on its ``parser``."""
    from probes.pipeline.audit import DEFAULT_LAG_S

    add_options(parser, "--store")
    parser.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="TIME",
        help="start: a UTC day (YYYY-MM-DD, from its first second), UNIX seconds or an ISO-8601 time",
    )
    parser.add_argument(
        "--to",
        dest="end",
        required=True,
        metavar="TIME",
        help="end: a UTC day (YYYY-MM-DD), included as in report and export; or UNIX seconds or an ISO-8601 "
        "time, the instant the window ends (excluded)",
    )
    parser.add_argument(
        "--lag-s",
        type=float,
        default=DEFAULT_LAG_S,
        metavar="S",
        help=f"seconds the pool may add at each end of a job, in the bound (default {DEFAULT_LAG_S:g})",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=NODES_SHOWN,
        metavar="N",
        help=f"nodes in the table (default {NODES_SHOWN}; 0: all)",
    )


def _gaps(report: AuditReport) -> pd.DataFrame:
    """The gaps with their start and end as ISO-8601 UTC."""
    import pandas as pd

    from collector.records import iso_utc

    gaps = report.gaps.copy()
    for col in ("start", "end"):
        gaps[col] = pd.Series(iso_utc(gaps[col]), index=gaps.index, dtype=object)
    return gaps


def audit_json(report: AuditReport) -> dict[str, Any]:
    from collector.records import iso_utc
    from probes.cli import views

    gaps = _gaps(report)
    return {
        "from": iso_utc([report.start])[0],
        "to": iso_utc([report.end])[0],
        "interval_s": report.interval_s,
        "lag_s": report.lag_s,
        "balanced": not (report.beyond or report.unbalanced or len(report.gaps) or report.running_unbilled > 0),
        "gaps": views.records(gaps),
        "node_gaps": views.records(report.node_gaps),
        "submitters": views.records(report.submitters),
        "nodes": views.records(report.nodes),
    }


def audit_sections(report: AuditReport, *, limit: int | None = NODES_SHOWN) -> list[Section]:
    from collector.records import iso_utc
    from probes.cli import views

    start, end = iso_utc([report.start, report.end])
    gaps = _gaps(report)
    verdict = (
        f"{report.beyond} of {len(report.submitters)} submitter rows beyond the sampling bound; "
        f"{report.unbalanced} of {len(report.nodes)} nodes out of balance; {len(report.gaps)} gaps; "
        f"{report.node_gaps['name'].nunique()} nodes unbilled for a while, {report.running_unbilled:.4f} "
        "running core-hours"
    )
    if report.unobserved_core_hours > 0:  # a loss a gap hides, named per submitter
        lost = report.submitters[report.submitters["unobserved_core_hours"] > 0]
        verdict += (
            f"\n{len(lost)} submitter rows ran {report.unobserved_core_hours:.4f} core-hours in the gaps, "
            "unchecked (unobserved_core_hours)"
        )
    head = (
        f"{start} to {end}: snapshots every {report.interval_s:g} s at most, bound = cores x "
        f"({report.interval_s:g} + {report.lag_s:g}) s per job\n{verdict}"
    )
    nodes = report.nodes.sort_values("balanced", kind="stable")
    return [
        ("audit", head),
        ("gaps (no snapshot stands for them: the probe or the collector was down)", views.table(gaps, _GAP_VIEW)),
        ("node gaps (missing from a snapshot, unheard, or unobserved): unbilled seconds and core-hours",
         views.table(report.node_gaps, _NODE_GAP_VIEW)),
        ("core-hours per submitter and site: held in allocation records vs completed jobs", views.table(
            report.submitters, _SUBMITTER_VIEW)),
        ("node books: offered CU-hours vs true overhead and allocated", views.table(
            nodes, _NODE_VIEW, limit=limit or None, what="nodes")),
    ]  # fmt: skip


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """The books of ``--from`` to ``--to`` from the store; exit 0 whatever they say (the
    JSON's ``balanced`` and the table's first lines say it)."""
    from probes.cli import views
    from probes.cli.times import parse_time, window_end
    from probes.pipeline.audit import audit

    start, end = parse_time(args.start, "--from"), window_end(args.end, "--to")
    with opened_store(config.store, config.probe.state_dir, create=False) as sink:
        report = audit(sink, config, start, end, lag_s=args.lag_s)
    if args.json:
        print(json.dumps(audit_json(report), indent=1))
    else:
        print(views.render(audit_sections(report, limit=args.limit)), end="")
    return EXIT_OK
