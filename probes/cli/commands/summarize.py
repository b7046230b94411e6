"""``fairacct summarize --from DAY --to DAY``: the daily summaries of a range of days, computed
in the store (the collector's work, :mod:`collector.summaries.run`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, opened_store, print_text, probe_name, store_of
from probes.cli.options import add_options, period_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "compute the daily summaries of a range of days in the store"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    period_options(add_options(parser, "--store"))


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.exports import Period
    from collector.summaries.run import steps, summarize
    from probes.cli.progress import progress_bar
    from probes.cli.times import parse_day

    period = Period(parse_day(args.first, "--from"), parse_day(args.last, "--to"))
    with (
        opened_store(*store_of(args, config), create=True) as sink,
        progress_bar(steps(period.first, period.last), "summarizing") as advance,
    ):
        summarized = summarize(
            sink, period.first, period.last, probe=probe_name(), progress=advance, reach_s=config.pool.max_interval_s
        )
    counts = ", ".join(f"{n} of {k} records" for k, n in summarized.records.items())
    stale = sum(summarized.deleted.values())
    doc = {
        "from": str(period.first),
        "to": str(period.last),
        "summaries": summarized.records,
        "deleted": summarized.deleted,
    }
    print_text(
        args,
        doc,
        f"summarized {period.first} to {period.last}: {summarized.total} summaries ({counts})"
        + (f"; {stale} of groups that no longer exist deleted" if stale else ""),
    )
    return EXIT_OK
