"""``fairacct penalty``: the multi-resource penalty of each job (Klusacek & Rudova 2015), beside
the metrics it replaces; jobs from --history or --swf, machines from --machines or --status-file."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_doc, usage_inputs
from probes.cli.options import workload_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "multi-resource penalty of each job, beside the metrics it replaces (Klusacek & Rudova 2015)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    workload_options(parser, "--history", "--status-file")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.cli import usage_views
    from probes.cli.views import read_counts
    from probes.pipeline import usage

    inputs = usage_inputs(args, config, need_machines=True)
    report = usage.penalty_report(inputs, config)
    doc = usage_views.penalty_json(report) | {"read": read_counts(inputs.reports)}
    if args.json:
        for note in doc.get("notes", []):
            print(f"fairacct: note: {note}", file=sys.stderr)
    print_doc(args, doc, usage_views.penalty_sections(report))
    return EXIT_OK
