"""``fairacct bill``: the proportional bills of the running jobs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_doc, read
from probes.cli.options import add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "proportional bills of the running jobs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, "--status-file")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.cli import views
    from probes.pipeline.overhead import overhead_report

    reading = read(args, config, "status_files", option="--status-file")
    assert reading.snapshot is not None
    report = overhead_report(reading.snapshot, config, reading.idle, exact=False)
    doc = views.bill_json(report.nodes, report.bills) | {"read": views.read_counts(reading.reports)}
    print_doc(args, doc, views.bill_sections(report.nodes, report.bills))
    return EXIT_OK
