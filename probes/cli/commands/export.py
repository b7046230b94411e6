"""``fairacct export --from DAY --to DAY --out FILE``: usage per project, user, site and month
(or other fields) for allocation committees, from the store's daily summaries (or its records,
``--raw``), as CSV, XLSX (with APEL's view and the books of each day beside), Parquet or JSON.

An export of the summaries never sums across the summaries' horizon in silence: the days of the
range the services no longer re-summarize are checked against their records
(:mod:`collector.exports.coverage`), and a day whose summaries do not count its records makes the
export refuse, naming the horizon, the days and the two ways out (``--raw``, ``fairacct summarize``),
before a file is written. A refusal, not a warning beside the file: the file goes to a committee
that allots hours by it, and the warning would stay on the operator's terminal.
"""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError, FairacctError
from probes.cli.common import EXIT_OK, is_collectors, opened_store, print_text, store_of
from probes.cli.options import add_options, awards_option, period_options

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
    awards_option(parser)


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.exports import Period, usage_table, write_export
    from collector.exports.table import audit_table
    from collector.sinks import describe_url
    from probes.cli.times import parse_day

    period = Period(parse_day(args.first, "--from"), parse_day(args.last, "--to"))
    if args.awards and args.fmt != "xlsx":  # a file asked for and silently not used would read as no award
        raise ConfigError(f"--awards: only --format xlsx carries the awards (an awards sheet), not --format {args.fmt}")
    store, base = store_of(args, config)
    with opened_store(store, base, create=False) as sink:
        by = [b.strip() for b in args.by.split(",") if b.strip()]
        if not args.raw:
            where = describe_url(store.url, base)
            _require_summaries(sink, period, where)
            _refuse_beyond_horizon(sink, period, where, *_horizon(args, config, datetime.now(UTC).date()))
        table = usage_table(sink, period, by, raw=args.raw)
        sheets = None
        if args.fmt == "xlsx":  # beside the usage: the awards, APEL's view, and the books of each day
            sheets = {
                **_award_sheets(sink, config, period, args.awards or config.awards.file),
                **_apel_sheet(sink, config, period),
                "audit": _with_total(audit_table(sink, period, reach_s=float(config.pool.max_interval_s))),
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


def _horizon(args: argparse.Namespace, config: ProbeConfig, today: date) -> tuple[date, str]:
    """The summaries' horizon: the first day the service of ``--config`` still re-summarizes (the
    collector's, or the probe's), and the setting that puts it there, for the message."""
    if is_collectors(args):
        c = config.collector
        days = {"collector.summaries_recent_days": c.summaries_recent_days}
        days["collector.summaries_nightly_days"] = c.summaries_nightly_days
    else:
        days = {"summaries.recent_days": config.summaries.recent_days}
        days["summaries.nightly_days"] = config.summaries.nightly_days
    key, widest = max(days.items(), key=lambda kv: kv[1])
    if not widest:  # no service re-summarizes anything: every day is summarized by hand, or not at all
        return today + timedelta(days=1), f"{' and '.join(days)} are 0: no service re-summarizes any day"
    return today - timedelta(days=widest - 1), f"{key} = {widest}: the service re-summarizes the last {widest} days"


def _refuse_beyond_horizon(sink: Sink, period: Period, where: str, horizon: date, why: str) -> None:
    """Refuse an export of summaries whose days before the horizon do not count their records
    (see the module docstring)."""
    from collector.exports.coverage import uncovered_days

    short = uncovered_days(sink, period, horizon=horizon)
    if not short:
        return
    first, last = short[0].day, short[-1].day
    days = len({u.day for u in short})
    shown = "; ".join(map(str, short[:3])) + ("; ..." if len(short) > 3 else "")
    raise FairacctError(
        f"{where}: the daily summaries of {days} day(s) from {first} to {last} do not count the records stored for "
        f"them ({shown}). Those days are before the summaries' horizon, {horizon} ({why}), so an export of the "
        f"summaries would count them short; nothing was written. Export the records with --raw, or summarize those "
        f"days first: `fairacct summarize --from {first} --to {last}` with the same --config"
    )


def _with_total(sheet: tuple[Any, Any]) -> tuple[Any, Any]:
    """A sheet's table with its total row (the books of the whole range), its meanings as they are."""
    from collector.exports.sheets import with_total

    table, meanings = sheet
    return with_total(table, ["day", "submitter", "site"]), meanings


def _award_sheets(sink: Sink, config: ProbeConfig, period: Period, file: str) -> dict[str, Any]:
    """The XLSX's awards: per project and per VO, the report's figures (used, billed, awarded,
    the share of the award used, the projection), each with its total row."""
    from collector.awards import read_awards
    from collector.exports.sheets import with_total
    from collector.report.committee import committee_tables
    from collector.report.committee_page import HEADERS

    awards = read_awards(file) if file else []
    a = config.apel
    c = committee_tables(sink, period, awards, vo_attribute=a.vo_attribute, vo_map=dict(a.vo_map))
    said = (
        f"Awards of {Path(file).name}; the current rate is each award's usage from its first day to {c.as_of}, "
        "the last day with records, carried to the award's last day."
        if awards
        else "No awards given ([awards] file, or --awards): usage alone."
    )
    notes = {"": " ".join([said, *c.notes])}
    projects = with_total(c.projects, ["project", "VO"])
    vos = with_total(c.vos, ["VO"])
    return {
        "awards": (projects, {col: HEADERS.get(col, col) for col in projects.columns} | notes),
        "awards by VO": (vos, {col: HEADERS.get(col, col) for col in vos.columns} | notes),
    }


def _apel_sheet(sink: Sink, config: ProbeConfig, period: Period) -> dict[str, Any]:
    """The XLSX's APEL view: what APEL gets beside fairacct's measures, per VO and month. A VO
    that is only an accounting group (``[apel] vo_attribute`` not named in ``vo_map``) is no VO:
    its rows are counted under :data:`~collector.report.committee.NO_VO`, and the groups said once."""
    from collector.apel import ApelOptions, months_between
    from collector.apel.view import VIEW_COLUMNS, apel_view
    from collector.exports.sheets import with_total
    from collector.report.committee import NO_VO
    from collector.sinks.base import Aggregation, Total

    a = config.apel
    options = ApelOptions(
        site=a.site, benchmark_type=a.benchmark_type, infrastructure=a.infrastructure,
        vo_attribute=a.vo_attribute, vo_map=dict(a.vo_map), placeholder_site=config.site.default,
    )  # fmt: skip
    months = months_between((period.first.year, period.first.month), (period.last.year, period.last.month))
    view = apel_view(sink, months, options)
    values = {
        str(r[a.vo_attribute])
        for kind in ("job", "allocation")
        for r in sink.aggregate(Aggregation(kind, (a.vo_attribute,), (Total("n"),), None, period.since, period.until))
        if r[a.vo_attribute] is not None
    }
    unmapped = sorted(v for v in values if v not in a.vo_map)
    meanings = dict(VIEW_COLUMNS)
    if unmapped:  # their jobs are left out of APEL's messages (collector.apel.grouping.mapped_vo)
        view["VO"] = view["VO"].where(view["VO"] != "(none)", NO_VO)
        meanings[""] = (
            f"{'Accounting group' if a.vo_attribute == 'group' else a.vo_attribute.capitalize()}(s) "
            f"{', '.join(unmapped)} name no VO in [apel] vo_map: counted under {NO_VO!r}, "
            "not as a VO, and not sent to APEL."
        )
    return {"apel": (with_total(view, ["month", "VO"]), meanings)}
