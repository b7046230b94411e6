"""The outputs' commands: ``summarize``, ``export``, ``report`` and ``dashboards install``.
Each returns the JSON document and the text the command line prints
(:func:`probes.cli.commands.outputs_command`); the work is the collector's, in the store."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collector.errors import FairacctError
from collector.exports import Period, usage_table, write_export
from collector.exports.table import audit_table
from collector.report import report_tables, write_report
from collector.settings import SinkSettings
from collector.sinks import Sink, describe_url, open_sink
from collector.summaries.run import steps, summarize
from probes.cli.parser import add_actions, add_options
from probes.cli.progress import progress_bar
from probes.cli.stores import store_of
from probes.cli.times import parse_day
from probes.config import ProbeConfig

__all__ = [
    "dashboards_arguments",
    "export_arguments",
    "report_arguments",
    "run_output_command",
    "summarize_arguments",
]


def summarize_arguments(cmd: argparse.ArgumentParser) -> None:
    _period(add_options(cmd, "--store"))


def export_arguments(cmd: argparse.ArgumentParser) -> None:
    _period(add_options(cmd, "--store"))
    cmd.add_argument(
        "--by",
        default="project,user,site,month",
        metavar="FIELDS",
        help="comma-separated: project, user, group, site, pool, resource_name, partition, phase, month, day",
    )
    cmd.add_argument(
        "--format",
        dest="fmt",
        choices=("csv", "csv-excel", "xlsx", "parquet", "json"),
        default="csv",
        help="csv: UTF-8 without a byte-order mark; csv-excel: with one, so Excel reads the accents (default csv)",
    )
    cmd.add_argument("--out", required=True, metavar="FILE", help="the file to write")
    cmd.add_argument("--raw", action="store_true", help="sum the raw records instead of the daily summaries")


def report_arguments(cmd: argparse.ArgumentParser) -> None:
    _period(add_options(cmd, "--store"))
    cmd.add_argument("--out", required=True, metavar="DIR", help="directory to write index.html into")
    cmd.add_argument(
        "--efficiency-by",
        default="site",
        metavar="ATTR",
        help="resource set of the efficiency plot: a slot record field (default site)",
    )
    cmd.add_argument(
        "--lab",
        action="store_true",
        help="add the fair-share lab's synthetic cases (Sedighi et al. 2014) in an appendix set apart from the "
        "site's data",
    )


def dashboards_arguments(cmd: argparse.ArgumentParser) -> None:
    install = add_options(
        add_actions(cmd)("install", help="import the dashboards through the saved-objects API"), "--store"
    )
    install.add_argument("--url", required=True, help="Kibana or OpenSearch Dashboards, http(s)://HOST:PORT")
    install.add_argument("--flavour", choices=("kibana", "opensearch"), default="kibana")


def _period(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--from", dest="first", required=True, metavar="DATE", help="first UTC day (YYYY-MM-DD)")
    cmd.add_argument("--to", dest="last", required=True, metavar="DATE", help="last UTC day, included")


@contextmanager
def _store(store: SinkSettings, base: Path, *, create: bool) -> Iterator[Sink]:
    """The store; without ``create`` an embedded store that does not exist is an error naming
    its path (reading one a typo would create says "0 rows")."""
    sink = open_sink(store.url, base=base, auth=store.auth(), create=create)
    try:
        yield sink
    finally:
        sink.close()


def _apel_sheet(sink: Sink, config: ProbeConfig, period: Period) -> dict[str, Any]:
    """The XLSX's APEL view: what APEL gets beside fairacct's measures, per VO and month."""
    from collector.apel import ApelOptions, months_between
    from collector.apel.view import VIEW_COLUMNS, apel_view

    a = config.apel
    options = ApelOptions(
        site=a.site, benchmark_type=a.benchmark_type, infrastructure=a.infrastructure,
        vo_attribute=a.vo_attribute, vo_map=dict(a.vo_map),
    )  # fmt: skip
    months = months_between((period.first.year, period.first.month), (period.last.year, period.last.month))
    return {"apel": (apel_view(sink, months, options), VIEW_COLUMNS)}


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


def run_output_command(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], str]:
    """Run one of the outputs' commands; its JSON document and its text."""
    if args.command == "dashboards":
        from collector.dashboards import install_dashboards  # urllib and TLS: only for this command
        from collector.sinks.elasticsearch.auth import read_auth

        s = config.store
        auth = read_auth(
            https=args.url.startswith("https"), api_key_file=s.api_key_file or None, api_key_env=s.api_key_env or None,
            username=s.username or None, password_file=s.password_file or None, password_env=s.password_env or None,
            ca_certs_file=s.ca_file or None, ca_certs_env=None,
        )  # fmt: skip
        imported = install_dashboards(args.url, flavour=args.flavour, auth=auth)
        doc = {"imported": imported.count, "errors": imported.errors}
        text = f"imported {imported.count} saved objects into {args.flavour} {args.url}"
        return doc, text + "".join(f"\n  {k}: {v}" for k, v in imported.errors.items())
    period = Period(parse_day(args.first, "--from"), parse_day(args.last, "--to"))
    store, base = store_of(args.config, config, args.store)  # a collector's configuration: the collector's store
    with _store(store, base, create=args.command == "summarize") as sink:
        if args.command == "summarize":
            with progress_bar(steps(period.first, period.last), "summarizing") as advance:
                summarized = summarize(
                    sink, period.first, period.last, probe=f"fairacct@{socket.gethostname()}", progress=advance,
                    reach_s=config.pool.max_interval_s,
                )  # fmt: skip
            counts = ", ".join(f"{n} of {k} records" for k, n in summarized.records.items())
            stale = sum(summarized.deleted.values())
            return {
                "from": str(period.first),
                "to": str(period.last),
                "summaries": summarized.records,
                "deleted": summarized.deleted,
            }, (
                f"summarized {period.first} to {period.last}: {summarized.total} summaries ({counts})"
                + (f"; {stale} of groups that no longer exist deleted" if stale else "")
            )
        if args.command == "export":
            by = [b.strip() for b in args.by.split(",") if b.strip()]
            if not args.raw:
                _require_summaries(sink, period, describe_url(store.url, base))
            table = usage_table(sink, period, by, raw=args.raw)
            sheets = None
            if args.fmt == "xlsx":  # beside the usage: APEL's view, and the books of each day
                sheets = {**_apel_sheet(sink, config, period), "audit": audit_table(sink, period)}
            path = write_export(table, args.out, args.fmt, period, sheets)
            return {"out": str(path), "rows": len(table), "format": args.fmt}, f"wrote {len(table)} rows to {path}"
        from probes.accounting.lab import run_lab  # the analytics' sections, only for the report
        from probes.cli.report_figures import lab_figures, report_figures

        figures = report_figures(sink, config, period, [], by=args.efficiency_by)
        appendix = lab_figures(run_lab(None, fraction=0.1)) if args.lab else []  # synthetic: never the site's
        path = write_report(report_tables(sink, period), args.out, figures, appendix)
        return {"report": str(path)}, f"wrote the report {path}"
