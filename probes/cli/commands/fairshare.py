"""``fairacct fairshare``: Maui-style fairshare by credential (Maui Admin Guide, 6.3) as
``diagnose -f`` prints it, Maui's FS.<epoch> files, or JSON; jobs from --history or --swf,
machines from --machines or --status-file."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_doc, usage_inputs
from probes.cli.options import workload_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Maui-style fairshare by credential: diagnose -f, FS.<epoch> files, JSON (Maui Admin Guide, 6.3)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    workload_options(parser, "--history", "--status-file")
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="when to evaluate: UNIX seconds or ISO-8601 (default: the end of the last job)",
    )
    parser.add_argument("--fs-dir", metavar="DIR", help="also write Maui's FS.<epoch> window files into DIR")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.cli import usage_views
    from probes.cli.times import parse_time
    from probes.cli.views import read_counts
    from probes.pipeline import usage

    inputs = usage_inputs(args, config, need_machines=False)
    at = parse_time(args.at, "--at") if args.at else None
    fs = usage.fairshare_report(inputs, config, at=at)
    written = [str(p) for p in usage.write_fs_files(fs.result, args.fs_dir)] if args.fs_dir else []
    doc = usage_views.fairshare_json(fs) | {"fs_files": written, "read": read_counts(inputs.reports)}
    if args.json:
        for note in doc.get("notes", []):
            print(f"fairacct: note: {note}", file=sys.stderr)
    print_doc(args, doc, usage_views.fairshare_sections(fs, written=written))
    return EXIT_OK
