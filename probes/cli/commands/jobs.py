"""``fairacct jobs``: the job history as the jobs table."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, report_problems, require, shown_rows
from probes.cli.options import add_options, limit_option

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "read job history into the jobs table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    limit_option(add_options(parser, "--history"))


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """The output of ``slots`` and ``idle`` (:func:`~probes.cli.common.print_read`), from the
    history read a few chunks at a time, so memory does not grow with the history (the whole
    table of 200,000 jobs held 90 MB more): as JSON each part is written as soon as it is read; a
    table keeps its first rows and counts the others. The JSON's read counts come last, and the
    problems after the output on stderr, as both are complete only then. With ``--strict`` a
    malformed ad ends the JSON where it was met: the parts read before it are written already,
    the document is left open, and the exit code and message are those of any strict read (1)."""
    from probes.cli import views
    from probes.pipeline.reading import Reading, iter_jobs
    from probes.sources.report import ReadTally

    require(config.sources.history, "sources.history", "--history")
    strict = config.sources.strict if args.strict is None else args.strict
    tally = ReadTally()  # filled as the history is read: its report is whole once the parts are taken
    parts = iter_jobs(config, tally, strict=strict)
    if args.json:
        views.write_tables_json(
            sys.stdout, {"jobs": parts}, lambda: {"history": tally.report()}, limit=shown_rows(args)
        )
    else:
        print(views.render([views.jobs_section(parts, limit=shown_rows(args))]), end="")
    report_problems(Reading(reports={"history": tally.report()}), args)
    return EXIT_OK
