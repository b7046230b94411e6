"""``fairacct efficiency``: efficiency by resource set (Jackson et al. 2001), from a status dump
(and a history: what drift cost its jobs) or the store's records; ``efficiency whatif``: an SWF
workload replayed on an Alea machines file under node-allocation policies."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError
from probes.cli.common import EXIT_OK, opened_store, print_doc, read, report_problems, require, time_arg
from probes.cli.options import workload_options

if TYPE_CHECKING:
    from probes.cli.views import Section
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "efficiency by resource set; `efficiency whatif`: node-allocation policies (Jackson et al. 2001)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probes.accounting.lab import WHATIF_POLICIES

    workload_options(parser, "--history", "--status-file", "--store")
    parser.add_argument(
        "mode", nargs="?", choices=["whatif"], help="whatif: replay --swf on --machines under node-allocation policies"
    )
    parser.add_argument(
        "--by", metavar="ATTR", help="resource set attribute: a slot column such as site, resource_name, speed"
    )
    parser.add_argument(
        "--policy", action="append", choices=WHATIF_POLICIES, help="what-if policy (repeatable; default: all)"
    )
    parser.add_argument(
        "--speed",
        action="append",
        default=[],
        metavar="CLASS=SPEED",
        help="what-if speed of a machine class (repeatable)",
    )
    parser.add_argument("--since", metavar="TIME", help="without --status-file: stored records at or after TIME")
    parser.add_argument("--until", metavar="TIME", help="without --status-file: stored records before TIME")
    parser.add_argument(
        "--period", choices=("day", "month"), help="without --status-file: per day or month of the records (UTC)"
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """Seed 001 (see probes.pipeline.analytics)."""
    if args.mode == "whatif":
        print_doc(args, *_whatif(args, config))
    elif not config.sources.status_files:
        print_doc(args, *_stored(args, config))
    else:
        print_doc(args, *_read(args, config))
    return EXIT_OK


def _whatif(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], list[Section]]:
    from probes.accounting.lab import WHATIF_POLICIES, whatif
    from probes.cli import analytics_views
    from probes.pipeline import analytics, usage
    from probes.pipeline.reading import Reading
    from probes.sources.workloads.swf import read_swf

    require(args.swf and args.machines, "--swf and --machines", "--swf FILE --machines FILE")
    speeds = dict(_speed(text) for text in args.speed)
    machines, _ = usage.alea_machines(args.machines, config, ram_unit=args.ram_unit)
    workload, swf_report = read_swf(args.swf)
    report_problems(Reading(reports={"swf": swf_report}), args)
    cluster = analytics.whatif_cluster(machines, speeds)
    frame = whatif(cluster, analytics.whatif_jobs(workload, cluster["set"]), args.policy or WHATIF_POLICIES)
    return analytics_views.whatif_json(frame, cluster), analytics_views.whatif_sections(frame, cluster)


def _stored(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], list[Section]]:
    """Without a status dump: the efficiency the store's records sum to."""
    from probes.cli import analytics_views
    from probes.pipeline.stored_efficiency import store_efficiency

    with opened_store(config.store, config.probe.state_dir, create=False) as sink:
        since, until = time_arg(args.since, "--since"), time_arg(args.until, "--until")
        frame = store_efficiency(sink, config, by=args.by, period=args.period, since=since, until=until)
    return analytics_views.efficiency_json(frame), analytics_views.efficiency_sections(frame, args.by)


def _read(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], list[Section]]:
    """A status dump's slots, and with a history what drift cost its jobs."""
    from probes.cli import analytics_views
    from probes.pipeline import analytics
    from probes.pipeline.overhead import overhead_report

    result = read(args, config, "status_files", "history", option="--status-file")
    assert result.snapshot is not None
    report = overhead_report(result.snapshot, config, result.idle)
    frame = analytics.efficiency_report(report.slots, result.jobs, config, by=args.by)
    doc, sections = analytics_views.efficiency_json(frame), analytics_views.efficiency_sections(frame, args.by)
    if result.jobs is not None and len(result.jobs):  # a history: what drift cost its jobs
        drift = analytics.history_drift(
            result.jobs, report.slots, args.by, speed_attribute=config.machines.speed_attribute
        )
        doc["drift"] = analytics_views.drift_json(drift)
        sections += analytics_views.drift_sections(drift, args.by)
    return doc, sections


def _speed(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    try:
        speed = float(value)
    except ValueError:
        speed = float("nan")
    if not name or not speed > 0:
        raise ConfigError(f"--speed must be CLASS=SPEED with a speed greater than 0, got {text!r}")
    return name, speed
