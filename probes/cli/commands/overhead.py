"""``fairacct overhead``: each slot's true overhead in canonical units, and its histogram."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_doc, read
from probes.cli.options import add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "true overhead of each slot in canonical units, and its histogram"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, "--status-file", "--idle-file")
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also evaluate idle jobs' Requirements against the slots (classad2)",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.cli import views
    from probes.pipeline.overhead import overhead_report

    reading = read(args, config, "status_files", "idle_files", option="--status-file")
    assert reading.snapshot is not None
    report = overhead_report(reading.snapshot, config, reading.idle, exact=args.exact)
    doc = views.overhead_json(report) | {"read": views.read_counts(reading.reports)}
    print_doc(args, doc, views.overhead_sections(report))
    return EXIT_OK
