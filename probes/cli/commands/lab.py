"""``fairacct lab``: the fair-share lab of Sedighi et al. 2014: Table 2.1, and cases 1-5 under
formula 2.1 and Maui's fairshare."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_doc
from probes.cli.options import add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "fair-share lab of Sedighi et al. 2014: Table 2.1, cases 1-5 under formula 2.1 and Maui fairshare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probes.accounting.lab import CASES

    add_options(parser)
    parser.add_argument("--case", choices=list(CASES), help="one case (default: all)")
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.1,
        help="starved at or below this fraction of an equal share (default 0.1)",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.accounting.lab import run_lab, table_2_1
    from probes.cli import analytics_views

    runs, table_21 = run_lab([args.case] if args.case else None, fraction=args.fraction), table_2_1()
    print_doc(args, analytics_views.lab_json(runs, table_21), analytics_views.lab_sections(runs, table_21))
    return EXIT_OK
