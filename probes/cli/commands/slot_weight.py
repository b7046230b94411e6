"""``fairacct slot-weight``: the ``SLOT_WEIGHT`` expression that approximates a fairacct metric,
with its error on the site's own history.

The JSON shape is a contract: ``{"metric", "slot_weight" (the ClassAd expression),
"coefficients": {"cpus", "memory", "disk"}, "classes": [...], "error": {"jobs",
"mean_abs_rel_error", "within_5pct", "usage_error", "total_error"}, "users": [{"user", "jobs",
"metric_usage", "weight_usage", "metric_share", "weight_share", "error_pct"}], "notes": [...]}``;
keys are added, never renamed or removed.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from probes.cli.common import EXIT_OK
from probes.cli.options import workload_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig
    from probes.pipeline.slot_weight import SlotWeightReport

__all__ = ["HELP", "add_arguments", "run", "slot_weight_json", "slot_weight_text"]

HELP = "the SLOT_WEIGHT (Cpus, Memory, Disk) that approximates the penalty, standard job or bills, with its error"

WORST_SHOWN = 10  # users in the table; --json has them all
_USER_VIEW = ("user", "jobs", "metric_h", "weight_h", "metric_share", "weight_share", "error_pct")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``slot-weight``'s options on its ``parser``."""
    from probes.pipeline.slot_weight import SLOT_METRICS

    workload_options(parser, "--history", "--status-file")
    parser.add_argument(
        "--metric", choices=SLOT_METRICS, default="penalty", help="the metric to approximate (default: penalty)"
    )


def slot_weight_json(report: SlotWeightReport) -> dict[str, Any]:
    from probes.cli import views

    e = report.error
    return {
        "metric": report.metric,
        "slot_weight": report.weight.expression(),
        "coefficients": {"cpus": report.weight.cpus, "memory": report.weight.memory, "disk": report.weight.disk},
        "classes": report.classes,
        "error": {
            "jobs": e.jobs,
            "mean_abs_rel_error": e.mean_abs_rel_error,
            "within_5pct": e.within,
            "usage_error": e.usage_error,
            "total_error": e.total_error,
        },
        "users": views.records(e.users),
        "notes": report.notes,
    }


def slot_weight_text(report: SlotWeightReport) -> str:
    from probes.cli import views

    e = report.error
    what = {"penalty": "the multi-resource penalty (Klusacek & Rudova 2015)", "standard-job": "the standard job",
            "billed": "the bills (Andrijauskas et al. 2023)"}[report.metric]  # fmt: skip
    head = "\n".join(
        [
            f"SLOT_WEIGHT = {report.weight.expression()}",
            "",
            f"approximates {what}" + (f" on the machine classes {', '.join(report.classes)}" if report.classes else ""),
            (
                f"error on the {e.jobs} "
                f"{'billed allocations of the snapshots' if report.metric == 'billed' else 'jobs of the history'}: "
                "mean |weight - metric| / metric "
                f"{100 * e.mean_abs_rel_error:.2f} %, {100 * e.within:.1f} % of them within 5 %; usage charged to the "
                f"wrong jobs {100 * e.usage_error:.2f} %, total usage {100 * e.total_error:+.2f} %"
            ),
        ]
    )
    users = e.users.head(WORST_SHOWN).assign(
        metric_h=e.users["metric_usage"] / 3600.0, weight_h=e.users["weight_usage"] / 3600.0
    )
    sections = [
        (f"slot-weight ({report.metric})", head),
        (
            f"the worst users (of {len(e.users)}): usage under the metric and under the weight, hours",
            views.table(users, _USER_VIEW, digits=2),
        ),
    ]
    if report.notes:
        sections.append(("notes", "\n".join(report.notes)))
    return views.render(sections)


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.pipeline.slot_weight import slot_weight_report

    report = slot_weight_report(
        config, args.metric, swf=args.swf, machines_file=args.machines, ram_unit=args.ram_unit, strict=args.strict
    )
    print(
        json.dumps(slot_weight_json(report), indent=1) if args.json else slot_weight_text(report),
        end="\n" if args.json else "",
    )
    return EXIT_OK
