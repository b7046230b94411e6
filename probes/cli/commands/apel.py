"""``fairacct apel``: APEL messages of whole months from the store (:mod:`collector.apel`),
into the directory queue APEL's ``ssmsend`` sends from, or on standard output."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError
from probes.cli.common import EXIT_OK
from probes.cli.options import add_options

if TYPE_CHECKING:
    from collector.apel import ApelOptions
    from collector.apel.grouping import ApelResult
    from probes.config import ProbeConfig

__all__ = ["HELP", "JOBS_PER_MESSAGE", "add_arguments", "apel_options", "parse_month", "run"]

HELP = "APEL messages (WLCG accounting) of whole months from the store, into ssmsend's outgoing queue"

JOBS_PER_MESSAGE = 1000
"""Individual job records per message: what APEL's own client puts in one."""

_MONTH = re.compile(r"(\d{4})-(\d{2})(?:-\d{2})?")
_BENCHMARKS = {"hepscore23": "HEPscore23", "hepspec": "HEPSPEC", "hs06": "HEPSPEC"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from collector.apel import KINDS

    add_options(parser, "--store")
    parser.add_argument("--month", metavar="YYYY-MM", help="the one month to send (default: the last whole month)")
    parser.add_argument("--from", dest="first", metavar="YYYY-MM", help="first month (a day means its month)")
    parser.add_argument("--to", dest="last", metavar="YYYY-MM", help="last month, included (default: --from)")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="the outgoing directory queue ssmsend sends from (default [apel] outgoing, else stdout)",
    )
    parser.add_argument("--kind", choices=tuple(KINDS), default="summary", help="the message (default summary, v0.3)")
    parser.add_argument("--benchmark-type", metavar="TYPE", help="HEPscore23 or HEPSPEC (HS06); default [apel]")
    parser.add_argument("--site", metavar="NAME", help="the site APEL knows for every message (default [apel] site)")
    parser.add_argument(
        "--source",
        choices=("job", "gratia"),
        default="job",
        help="fairacct's job records, or Gratia records as gracc-apel sends them (Batch or Grid Local, of [apel] "
        "gratia_vos, records counted)",
    )
    parser.add_argument(
        "--switch-kind",
        action="store_true",
        help="send a month already sent as the other summary kind, or as summaries with --kind jobs (the old kind's "
        "records are zeroed; a month sent as jobs cannot switch: APEL cannot remove job records)",
    )


def parse_month(text: str, option: str) -> tuple[int, int]:
    """(year, month) of 'YYYY-MM' (or a day 'YYYY-MM-DD': its month)."""
    m = _MONTH.fullmatch(text.strip())
    if not m or not 1 <= int(m.group(2)) <= 12:
        raise ConfigError(f"{option}: expected a month like 2026-05 (or a day of it), got {text!r}")
    return int(m.group(1)), int(m.group(2))


def _months(args: argparse.Namespace, now_month: tuple[int, int]) -> list[tuple[int, int]]:
    from collector.apel import months_between

    if args.month and (args.first or args.last):
        raise ConfigError("--month: give either --month or --from/--to, not both")
    if args.month:
        return [parse_month(args.month, "--month")]
    if args.first:
        first = parse_month(args.first, "--from")
        last = parse_month(args.last, "--to") if args.last else first
        if last < first:
            raise ConfigError(f"--to ({args.last}) is before --from ({args.first})")
        return months_between(first, last)
    if args.last:
        raise ConfigError("--to needs --from")
    year, month = now_month
    return [(year - 1, 12) if month == 1 else (year, month - 1)]


def apel_options(config: ProbeConfig, args: argparse.Namespace) -> ApelOptions:
    """``[apel]`` with the command line's ``--site``, ``--benchmark-type`` and ``--source`` over it."""
    from collector.apel import ApelOptions

    a = config.apel
    given = args.benchmark_type or a.benchmark_type
    benchmark = _BENCHMARKS.get(given.lower())
    if benchmark is None:
        raise ConfigError(f"--benchmark-type: expected HEPscore23 or HEPSPEC (HS06), got {given!r}")
    return ApelOptions(
        source=args.source,
        site=args.site or a.site,
        benchmark_type=benchmark,
        infrastructure=a.infrastructure,
        vo_attribute=a.vo_attribute,
        vo_map=dict(a.vo_map),
        site_benchmarks=dict(a.site_benchmarks),
        gratia_vos=tuple(a.gratia_vos),
        placeholder_site=config.site.default,
    )


def _now(
    kind: str, result: ApelResult, sink: Any, options: ApelOptions, ledger: dict[str, Any]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, int]]]:
    """The records of ``kind`` of this send per ledger name (``SITE YYYY-MM``); for the jobs kind,
    also the jobs left out per name and reason (the summaries' own say it for the others). The
    sync records of a month the ledger says went as jobs count its job records, as APEL holds them."""
    from collector.apel import job_records
    from collector.apel.ledger import folded_id, month_id

    if kind == "summary" or kind == "normalised":
        return {month_id(m.site, m.year, m.month): m.summaries for m in result.months}, {}
    if kind == "sync":
        sync = {month_id(m.site, m.year, m.month): m.sync for m in result.months}
        as_jobs = {folded_id(n) for n, e in ledger.items() if isinstance(e, dict) and e.get("kind") == "jobs"}
        for year, month in sorted({(m.year, m.month) for m in result.months}):
            names = [n for n in sync if n.endswith(f" {year:04d}-{month:02d}") and folded_id(n) in as_jobs]
            if not names:
                continue
            counts: dict[tuple[str, Any], int] = {}
            for r in job_records(sink, year, month, options)[0]:
                key = (folded_id(month_id(r["Site"], year, month)), r["SubmitHost"])
                counts[key] = counts.get(key, 0) + 1
            for name in names:
                site = name.rpartition(" ")[0]
                sync[name] = [
                    {"Site": site, "SubmitHost": host, "NumberOfJobs": n, "Month": month, "Year": year}
                    for (fid, host), n in sorted(counts.items(), key=str)
                    if fid == folded_id(name)
                ]
        return sync, {}
    now: dict[str, list[dict[str, Any]]] = {}
    left: dict[str, dict[str, int]] = {}
    for year, month in sorted({(m.year, m.month) for m in result.months}):
        records, left_out = job_records(sink, year, month, options)
        for r in records:
            now.setdefault(month_id(r["Site"], year, month), []).append(r)
        for (site, reason), jobs in left_out.items():
            left.setdefault(month_id(site, year, month), {})[reason] = jobs
    return now, left


def _texts(per: dict[tuple[str, str], list[dict[str, Any]]], options: ApelOptions) -> list[str]:
    """The messages of a plan: one per kind and site-month, job records a thousand a message."""
    from collector.apel import KINDS, render

    texts = []
    for (kind, _), records in sorted(per.items()):
        size = JOBS_PER_MESSAGE if kind == "jobs" else max(len(records), 1)
        for i in range(0, len(records), size):
            texts.append(render(KINDS[kind], records[i : i + size], benchmark_type=options.benchmark_type))
    return texts


def _summary_sites(result: ApelResult) -> list[dict[str, Any]]:
    """What each site-month's summaries hold, as APEL will hold it (each record's times rounded)."""
    return [
        {
            "site": m.site,
            "month": f"{m.year:04d}-{m.month:02d}",
            "records": len(m.summaries),
            "jobs": int(sum(r["NumberOfJobs"] for r in m.summaries)),
            "wall_s": sum(round(float(r["WallDuration"])) for r in m.summaries),
            "normalised_wall_s": sum(round(float(r["NormalisedWallDuration"])) for r in m.summaries),
            "unbenchmarked_jobs": m.unbenchmarked_jobs,
            "unbenchmarked_wall_hours": m.unbenchmarked_wall_s / 3600.0,
            "left_out": m.left_out,
        }
        for m in result.months
    ]


def _jobs_sites(now: dict[str, list[dict[str, Any]]], left: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """What each site-month's job records become in APEL's summaries (its summariser's sums:
    :func:`collector.apel.job_summaries`), and the jobs left out."""
    from collector.apel import job_summaries

    out = []
    for name in sorted(set(now) | set(left)):
        site, _, month = name.rpartition(" ")
        rows = job_summaries(now.get(name, []))
        out.append(
            {
                "site": site,
                "month": month,
                "records": len(now.get(name, [])),
                "jobs": sum(r["NumberOfJobs"] for r in rows),
                "wall_s": sum(r["WallDuration"] for r in rows),
                "normalised_wall_s": sum(r["NormalisedWallDuration"] for r in rows),
                "unbenchmarked_jobs": 0,
                "unbenchmarked_wall_hours": 0.0,
                "left_out": left.get(name, {}),
            }
        )
    return out


LEDGER_FILE = "apel-sent.json"
"""The keys and kind sent per site and month (:mod:`collector.apel.ledger`), in the state directory."""


def _read_ledger(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the ledger of what was sent to APEL ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the ledger of what was sent to APEL is not a JSON object")
    return data


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """Group the months in the store, render the messages, deliver them (or print them)."""
    from datetime import UTC, datetime

    from collector.apel import KINDS, apel_months, deliver
    from collector.apel.ledger import plan
    from collector.sinks import open_store

    options = apel_options(config, args)
    if args.kind == "summary" and options.benchmark_type != "HEPSPEC":
        raise ConfigError(
            f"--kind summary: APEL reads a v0.3 summary's normalised times as HEPSPEC, and the benchmark is "
            f"{options.benchmark_type}; send --kind normalised (v0.4), which names it"
        )
    if args.kind == "jobs" and options.source == "gratia":
        raise ConfigError(
            "--kind jobs: individual job messages are made of fairacct's job records, not --source gratia"
        )
    now = datetime.now(UTC)
    months = _months(args, (now.year, now.month))
    sink = open_store(config.store, config.opening())
    try:
        result = apel_months(sink, months, options)
        out = args.out or config.apel.outgoing
        ledger_path = Path(config.probe.state_dir) / LEDGER_FILE
        # a re-send replaces the month in APEL's tables: zero records for what was sent before
        # (the ledger is kept only where the messages go to APEL's queue)
        ledger = _read_ledger(ledger_path) if out else {}
        now_records, jobs_left = _now(args.kind, result, sink, options, ledger)
    finally:
        sink.close()
    planned = plan(args.kind, now_records, [f"{y:04d}-{m:02d}" for y, m in months], ledger, switch=args.switch_kind)
    texts = _texts(planned.records, options)
    zeroed = planned.zeroed
    delivered = deliver(out, texts) if out else None
    if delivered is not None and planned.entries:
        from probes.files import atomic_write

        kept = {k: v for k, v in _read_ledger(ledger_path).items() if k not in planned.dropped}
        atomic_write(ledger_path, json.dumps(kept | planned.entries, indent=1, sort_keys=True))
    doc: dict[str, Any] = {
        "kind": args.kind,
        "header": KINDS[args.kind].header,
        "benchmark_type": options.benchmark_type,
        "months": [f"{y:04d}-{m:02d}" for y, m in months],
        "messages": len(texts),
        "sites": _jobs_sites(now_records, jobs_left) if args.kind == "jobs" else _summary_sites(result),
        "unsited_jobs": result.unsited_jobs,
        "merged": [str(m) for m in result.merged],
    }
    if delivered is not None:
        doc |= {"out": str(out), "added": len(delivered.added), "replaced": len(delivered.replaced), "zeroed": zeroed}
    elif args.json:
        doc["texts"] = texts
    if args.json:
        print(json.dumps(doc, indent=1))
        return EXIT_OK
    if delivered is None:
        sys.stdout.write("".join(texts))
    lines = [
        f"{s['site']} {s['month']}: {s['jobs']} jobs in {s['records']} records"
        + (
            f"; {s['unbenchmarked_jobs']} jobs ({s['unbenchmarked_wall_hours']:.1f} wall hours) on hosts without a "
            f"{options.benchmark_type} benchmark, not normalised and not sent"
            if s["unbenchmarked_jobs"]
            else ""
        )
        + "".join(f"; {jobs} jobs left out: {reason}" for reason, jobs in s["left_out"].items())
        for s in doc["sites"]
    ]
    lines += [f"merged: {m}" for m in doc["merged"]]
    if result.unsited_jobs:
        lines.append(
            f"{result.unsited_jobs} jobs without a site (or with [site] default {config.site.default!r}): "
            "not sent (set [apel] site or --site)"
        )
    if zeroed:
        lines.append(f"{zeroed} records of zero jobs for keys sent before and no longer produced (APEL keeps them)")
    if delivered is not None:
        lines.append(
            f"{len(delivered.added)} {KINDS[args.kind].header} messages into {out}"
            + (f" ({len(delivered.replaced)} queued ones of the same months replaced)" if delivered.replaced else "")
        )
    print("\n".join(lines) or "no records in those months", file=sys.stderr if delivered is None else sys.stdout)
    return EXIT_OK
