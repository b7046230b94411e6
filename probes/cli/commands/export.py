"""``fairacct export --from DAY --to DAY --out FILE``: usage per project, user, site and month
(or other fields) for allocation committees, from the store's daily summaries (or its records,
``--raw``), as CSV, XLSX (with APEL's view and the books of each day beside), Parquet or JSON."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from collector.errors import FairacctError
from probes.cli.common import EXIT_OK, open_store, print_text, store_of
from probes.cli.options import add_options, period_options

if TYPE_CHECKING:
    from collector.exports import Period
    from collector.sinks import Sink
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "usage per project, user, site and month for allocation committees"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    period_options(add_options(parser, "--store"))
    parser.add_argument(
        "--by",
        default="project,user,site,month",
        metavar="FIELDS",
        help="comma-separated: project, user, group, site, pool, resource_name, partition, phase, month, day",
    )
    parser.add_argument(
        "--format",
        dest="fmt",
        choices=("csv", "csv-excel", "xlsx", "parquet", "json"),
        default="csv",
        help="csv: UTF-8 without a byte-order mark; csv-excel: with one, so Excel reads the accents (default csv)",
    )
    parser.add_argument("--out", required=True, metavar="FILE", help="the file to write")
    parser.add_argument("--raw", action="store_true", help="sum the raw records instead of the daily summaries")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.exports import Period, usage_table, write_export
    from collector.exports.table import audit_table
    from collector.sinks import describe_url
    from probes.cli.times import parse_day

    period = Period(parse_day(args.first, "--from"), parse_day(args.last, "--to"))
    store, base = store_of(args, config)
    with open_store(store, base, create=False) as sink:
        by = [b.strip() for b in args.by.split(",") if b.strip()]
        if not args.raw:
            _require_summaries(sink, period, describe_url(store.url, base))
        table = usage_table(sink, period, by, raw=args.raw)
        sheets = None
        if args.fmt == "xlsx":  # beside the usage: APEL's view, and the books of each day
            sheets = {
                **_apel_sheet(sink, config, period),
                "audit": audit_table(sink, period, reach_s=float(config.pool.max_interval_s)),
            }
        path = write_export(table, args.out, args.fmt, period, sheets)
    print_text(args, {"out": str(path), "rows": len(table), "format": args.fmt}, f"wrote {len(table)} rows to {path}")
    return EXIT_OK


def _require_summaries(sink: Sink, period: Period, where: str) -> None:
    """An export of the daily summaries when the range has none, but records: an error saying
    how to make them, not an empty file (the collector makes them only every few minutes)."""
    if sink.query("summary", since=period.since, until=period.until, limit=1):
        return
    if any(sink.query(kind, since=period.since, until=period.until, limit=1) for kind in ("job", "allocation", "slot")):
        raise FairacctError(
            f"{where} has records but no daily summaries from {period.first} to {period.last}: run "
            f"`fairacct summarize --from {period.first} --to {period.last}` with the same --config first "
            "(the collector service makes them every collector.summaries_every_s), or export the records with --raw"
        )


def _apel_sheet(sink: Sink, config: ProbeConfig, period: Period) -> dict[str, Any]:
    """The XLSX's APEL view: what APEL gets beside fairacct's measures, per VO and month."""
    from collector.apel import ApelOptions, months_between
    from collector.apel.view import VIEW_COLUMNS, apel_view

    a = config.apel
    options = ApelOptions(
        site=a.site, benchmark_type=a.benchmark_type, infrastructure=a.infrastructure,
        vo_attribute=a.vo_attribute, vo_map=dict(a.vo_map), placeholder_site=config.site.default,
    )  # fmt: skip
    months = months_between((period.first.year, period.first.month), (period.last.year, period.last.month))
    return {"apel": (apel_view(sink, months, options), VIEW_COLUMNS)}
