"""``fairacct report --from DAY --to DAY --out DIR``: a static HTML report (plots and tables) of
a range of days in the store, with the fair-share lab's synthetic cases in an appendix (``--lab``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, opened_store, print_text, store_of
from probes.cli.options import add_options, awards_option, period_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "a static HTML report (plots and tables) of a range of days"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    period_options(add_options(parser, "--store"))
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write index.html into")
    awards_option(parser)
    parser.add_argument(
        "--efficiency-by",
        default="site",
        metavar="ATTR",
        help="resource set of the efficiency plot: a slot record field (default site)",
    )
    parser.add_argument(
        "--lab",
        action="store_true",
        help="add the fair-share lab's synthetic cases (Sedighi et al. 2014) in an appendix set apart from the "
        "site's data",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.awards import read_awards
    from collector.exports import Period
    from collector.report import report_tables, write_report
    from probes.accounting.lab import run_lab  # the analytics' sections, only for the report
    from probes.cli.report_figures import lab_figures, report_figures
    from probes.cli.times import parse_day

    period = Period(parse_day(args.first, "--from"), parse_day(args.last, "--to"))
    file = args.awards or config.awards.file
    awards = read_awards(file) if file else []  # read before the store: a wrong file says so at once
    a = config.apel
    with opened_store(*store_of(args, config), create=False) as sink:
        figures = report_figures(sink, config, period, [], by=args.efficiency_by)
        appendix = lab_figures(run_lab(None, fraction=0.1)) if args.lab else []  # synthetic: never the site's
        tables = report_tables(sink, period, awards, vo_attribute=a.vo_attribute, vo_map=dict(a.vo_map))
        path = write_report(tables, args.out, figures, appendix)
    print_text(args, {"report": str(path)}, f"wrote the report {path}")
    return EXIT_OK
