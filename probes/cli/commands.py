"""The ``fairacct`` commands, run once :mod:`~probes.cli.parser` has read the command line: the
functions :mod:`~probes.cli.registry` names (the ``priority`` and ``slot-weight`` commands'
are in their own modules), and :func:`run`, which calls them.

Only the command line (:mod:`probes.cli`) prints; the code below it returns or raises. Library
code raises :class:`~collector.errors.FairacctError`, and :func:`run` alone turns it into one
line on stderr and an exit code, which the ``fairacct`` script (or ``python -m probes``) exits
with: 2 for a bad command line (argparse's own exit) or configuration, 1 for a source or store
that failed (or records the store refused for good: dead letters), 3 for ``probe once`` when
the cycle was committed to the outbox but not sent (the store did not answer: the next
``probe once`` or ``probe run`` sends it), 0 otherwise (malformed ads that were quarantined are
not a failure).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError, FairacctError
from collector.outbox import Outbox, OutboxStatus
from collector.records import iso_utc
from collector.sinks import describe_url, ensure_templates, open_sink, sqlite_path
from collector.statelock import hold_state_dir
from probes.cli import views
from probes.cli.compiling import announce_compiling
from probes.cli.parser import TABLE_ROWS
from probes.cli.registry import COMMANDS
from probes.cli.times import parse_time
from probes.config import COLLECTOR_STORE_NOTE, ProbeConfig, apply_overrides, load_config
from probes.files import check_writable
from probes.pipeline.cycle import Cycle, Delivery, run_once
from probes.pipeline.overhead import OverheadReport, overhead_report
from probes.pipeline.reading import Reading, check_sources, read_sources
from probes.sources import sandbox
from probes.sources.history import iter_history
from probes.sources.report import ReadReport, problem_lines

if TYPE_CHECKING:
    from probes.sources.live import LivePool

__all__ = [
    "analytics_command",
    "bill_command",
    "collector_command",
    "config_command",
    "idle_command",
    "jobs_command",
    "outputs_command",
    "overhead_command",
    "probe_command",
    "run",
    "slots_command",
    "store_command",
    "usage_command",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_QUEUED = 0, 1, 2, 3


def run(args: argparse.Namespace) -> int:
    """Run the command :func:`probes.cli.parser.parse` read (its function in the registry); its exit code."""
    try:
        config = apply_overrides(load_config(args.config), vars(args))
        sandbox.configure(config.sources.evaluation_budget_s)
        with announce_compiling():  # the first run after an install: 20-60 s of numba, said on stderr
            return COMMANDS[args.command].runner()(args, config)
    except ConfigError as exc:
        print(f"fairacct: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FairacctError as exc:
        print(f"fairacct: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `fairacct jobs | head`
        return EXIT_OK


# -- the commands' functions, as the registry names them (probes.cli.registry) -------------------


def slots_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    _print_read(args, _read(args, config, "status_files", option="--status-file"))
    return EXIT_OK


def idle_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    # idle demand from a condor_q -autocluster dump needs the running jobs of a status dump
    _print_read(args, _read(args, config, "idle_files", "status_files", option="--idle-file"))
    return EXIT_OK


def jobs_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    _require(config.sources.history, "sources.history", "--history")
    return _print_jobs(args, config)


def overhead_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    result = _read(args, config, "status_files", "idle_files", option="--status-file")
    _print_doc(args, *_show(args, result, config))
    return EXIT_OK


def bill_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    _print_doc(args, *_show(args, _read(args, config, "status_files", option="--status-file"), config))
    return EXIT_OK


def analytics_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """efficiency [whatif], fairness, lab."""
    _print_doc(args, *_analytics(args, config))
    return EXIT_OK


def probe_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """probe once: one cycle into the store, and what it found; probe run: the service."""
    if args.action == "run":
        return _serve(config, args.duration)
    if args.action == "checkpoints":
        from probes.cli.checkpoints import run_checkpoints

        doc, text = run_checkpoints(args, config)
        print(json.dumps(doc, indent=1) if args.json else text)
        return EXIT_OK
    _require(
        config.sources.live or config.sources.status_files or config.sources.history or config.sources.idle_files,
        "sources",
        "--status-file, --idle-file or --history (or set sources.live = true)",
    )
    cycle, delivery, status, last_dead = _store_cycle(config, args.strict)
    _report_problems(cycle.reading, config, args)
    if cycle.snapshot.replayed:
        print(f"fairacct: {cycle.snapshot.replayed}", file=sys.stderr)
    if cycle.snapshot.unobserved_s:
        print(
            f"fairacct: note: {cycle.snapshot.unobserved_s:.0f} s before this snapshot were not observed (a gap "
            f"longer than pool.max_interval_s = {config.pool.max_interval_s:g} s): no slot record claims them",
            file=sys.stderr,
        )
    _print_doc(args, *_show_cycle(cycle, delivery, config))
    return _delivery(delivery, status, last_dead)


def config_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """config check: the configuration as the commands see it, once checked; config example:
    the files the wheel ships, printed or written."""
    if args.action == "example":
        return _examples(args)
    _check_config(config)
    _warn_loose_token(config)
    print(json.dumps(config.model_dump(mode="json"), indent=2))
    return EXIT_OK


def _examples(args: argparse.Namespace) -> int:
    from probes.examples import EXAMPLES, example_text

    if not args.write:
        print(example_text(args.name), end="")
        return EXIT_OK
    folder = Path(args.write)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in EXAMPLES:
            target = folder / name
            if target.exists():
                print(f"fairacct: {target} exists, kept as it is", file=sys.stderr)
                continue
            target.write_text(example_text(name), encoding="utf-8")
            print(f"wrote {target}")
    except OSError as exc:
        raise ConfigError(f"--write: cannot write into {folder}: {exc.strerror or exc}") from exc
    return EXIT_OK


def outputs_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """summarize, export, report, dashboards install."""
    from probes.cli.outputs import run_output_command  # the stores' clients, the exports, the report

    doc, text = run_output_command(args, config)
    print(json.dumps(doc, indent=1) if args.json else text)
    return EXIT_OK


def _read(args: argparse.Namespace, config: ProbeConfig, *reads: str, option: str) -> Reading:
    """The sources ``reads`` (settings of ``[sources]``), of which the first must be given (in
    the configuration or as ``option``); the problems on stderr."""
    _require(getattr(config.sources, reads[0]), f"sources.{reads[0]}", option)
    result = read_sources(config, strict=args.strict, only=reads)
    _report_problems(result, config, args)
    return result


def _print_doc(args: argparse.Namespace, doc: dict[str, Any], sections: list[views.Section]) -> None:
    """A command's JSON document with ``--json``, else its tables."""
    print(json.dumps(doc, indent=1) if args.json else views.render(sections), end="\n" if args.json else "")


def _show(
    args: argparse.Namespace, reading: Reading, config: ProbeConfig
) -> tuple[dict[str, Any], list[views.Section]]:
    """overhead, bill: the JSON document and the tables they print."""
    assert reading.snapshot is not None
    exact = args.command == "overhead" and args.exact  # the exact cross-check is the command's own
    report = overhead_report(reading.snapshot, config, reading.idle, exact=exact)
    if args.command == "overhead":
        return views.overhead_json(report), views.overhead_sections(report)
    return views.bill_json(report.nodes, report.bills), views.bill_sections(report.nodes, report.bills)


def _show_cycle(cycle: Cycle, delivery: Delivery, config: ProbeConfig) -> tuple[dict[str, Any], list[views.Section]]:
    """probe once: what was read, the snapshot's accounting, and what became of the records."""
    reading, flushed = cycle.reading, delivery.flushed
    doc: dict[str, Any] = {
        "read": views.read_json(reading, slots=False)["read"],
        "enqueued": cycle.enqueued,
        "sent": _nonzero(flushed.sent) if flushed else {},
        "retry": _nonzero(flushed.retried) if flushed else {},
        "dead": _nonzero(flushed.dead) if flushed else {},
        "unsent": delivery.unsent,
    }
    sections: list[views.Section] = [("read", _read_summary(reading))]
    report: OverheadReport | None = cycle.snapshot.overhead
    if report is None and reading.snapshot is not None:  # a replay: shown, though not recorded again
        report = overhead_report(reading.snapshot, config, reading.idle)
    if report is not None:
        doc |= {"overhead": views.overhead_json(report), "bill": views.bill_json(report.nodes, report.bills)}
        sections += views.overhead_sections(report, per_slot=False)
        sections += views.bill_sections(report.nodes, report.bills, per_job=False)
    where = describe_url(config.store.url, config.probe.state_dir)
    sections.append(("records", views.records_summary(cycle.enqueued, delivery, where)))
    return doc, sections


def _print_read(args: argparse.Namespace, result: Reading) -> None:
    """slots, idle: every row as JSON, streamed, or the first TABLE_ROWS of each table
    (``--limit`` says otherwise in both; 0 is every row)."""
    limit = _rows(args)
    if args.json:
        views.write_read_json(sys.stdout, result, slots=args.command == "slots", limit=limit)
    else:
        print(views.render(views.read_sections(result, slots=args.command == "slots", limit=limit)), end="")


def _print_jobs(args: argparse.Namespace, config: ProbeConfig) -> int:
    """jobs: :func:`_print_read`'s output, from the history read a few chunks at a time, so
    memory does not grow with the history (the whole table of 200,000 jobs held 90 MB more):
    as JSON each part is written as soon as it is read; a table keeps its first rows and counts
    the others. The JSON's read counts come last, and the problems after the output on
    stderr, as both are complete only then. With ``--strict`` a malformed ad ends the JSON
    where it was met: the parts read before it are written already, the document is left
    open, and the exit code and message are those of any strict read (1)."""
    strict = config.sources.strict if args.strict is None else args.strict
    report = ReadReport()  # filled as the history is read
    parts = iter_history(config.sources.history, config.job_reading(), report, strict=strict)
    if args.json:
        views.write_tables_json(sys.stdout, {"jobs": parts}, {"history": report}, limit=_rows(args))
    else:
        print(views.render([views.jobs_section(parts, limit=_rows(args))]), end="")
    _report_problems(Reading(reports={"history": report}), config, args)
    return EXIT_OK


def _rows(args: argparse.Namespace) -> int | None:
    """The rows slots, idle and jobs show of each table (None: all): ``--limit`` (0: all), else
    every row as JSON and the first TABLE_ROWS of a table."""
    if args.limit is not None:
        return args.limit or None
    return None if args.json else TABLE_ROWS


def usage_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """The penalty and fairshare commands: jobs from --history or --swf, machines from
    --machines or --status-file."""
    from probes.cli import usage_views
    from probes.pipeline import usage

    if args.swf and args.history:
        raise ConfigError("give --history or --swf, not both")
    if args.machines and args.status_file:
        raise ConfigError("give --machines or --status-file, not both")
    inputs = usage.read_usage_inputs(
        config, swf=args.swf, machines_file=args.machines, ram_unit=args.ram_unit, strict=args.strict,
        need_machines=args.command == "penalty",
    )  # fmt: skip
    _report_problems(Reading(reports=inputs.reports), config, args)
    if args.command == "penalty":
        report = usage.penalty_report(inputs, config)
        doc, sections = usage_views.penalty_json(report), usage_views.penalty_sections(report)
    else:
        at = parse_time(args.at, "--at") if args.at else None
        fs = usage.fairshare_report(inputs, config, at=at)
        written = [str(p) for p in usage.write_fs_files(fs.result, args.fs_dir)] if args.fs_dir else []
        doc, sections = (
            usage_views.fairshare_json(fs) | {"fs_files": written},
            usage_views.fairshare_sections(fs, written=written),
        )
    if args.json:
        for note in doc.get("notes", []):
            print(f"fairacct: note: {note}", file=sys.stderr)
    _print_doc(args, doc, sections)
    return EXIT_OK


def _analytics(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], list[views.Section]]:
    """efficiency [whatif], fairness, lab: seeds 001 and 002 (see probes.pipeline.analytics)."""
    from probes.accounting.lab import WHATIF_POLICIES, run_lab, table_2_1, whatif
    from probes.cli import analytics_views
    from probes.pipeline import analytics, usage
    from probes.pipeline.records import fairness_docs
    from probes.sources.workloads.swf import read_swf

    if args.command == "lab":
        runs, table_21 = run_lab([args.case] if args.case else None, fraction=args.fraction), table_2_1()
        return analytics_views.lab_json(runs, table_21), analytics_views.lab_sections(runs, table_21)
    if args.command == "efficiency" and args.mode == "whatif":
        _require(args.swf and args.machines, "--swf and --machines", "--swf FILE --machines FILE")
        speeds = dict(_speed(text) for text in args.speed)
        machines, _ = usage.alea_machines(args.machines, config, ram_unit=args.ram_unit)
        workload, swf_report = read_swf(args.swf)
        _report_problems(Reading(reports={"swf": swf_report}), config, args)
        cluster = analytics.whatif_cluster(machines, speeds)
        frame = whatif(cluster, analytics.whatif_jobs(workload, cluster["set"]), args.policy or WHATIF_POLICIES)
        return analytics_views.whatif_json(frame, cluster), analytics_views.whatif_sections(frame, cluster)
    if args.command == "efficiency" and not config.sources.status_files:  # the stored records
        sink = open_sink(config.store.url, base=config.probe.state_dir, auth=config.store.auth(), create=False)
        try:
            since, until = _time_arg(args.since, "--since"), _time_arg(args.until, "--until")
            from probes.pipeline.stored_efficiency import store_efficiency

            frame = store_efficiency(sink, config, by=args.by, period=args.period, since=since, until=until)
        finally:
            sink.close()
        return analytics_views.efficiency_json(frame), analytics_views.efficiency_sections(frame, args.by)
    only = ("status_files", "history") if args.command == "efficiency" else ("status_files", "idle_files")
    _require(config.sources.status_files, "sources.status_files", "--status-file")
    result = read_sources(config, strict=args.strict, only=only)
    _report_problems(result, config, args)
    assert result.snapshot is not None
    report = overhead_report(result.snapshot, config, result.idle)
    if args.command == "efficiency":
        frame = analytics.efficiency_report(report.slots, result.jobs, config, by=args.by)
        doc, sections = analytics_views.efficiency_json(frame), analytics_views.efficiency_sections(frame, args.by)
        if result.jobs is not None and len(result.jobs):  # a history: what drift cost its jobs
            drift = analytics.history_drift(
                result.jobs, report.slots, args.by, speed_attribute=config.machines.speed_attribute
            )
            doc["drift"] = analytics_views.drift_json(drift)
            sections += analytics_views.drift_sections(drift, args.by)
        return doc, sections
    bucket_s = config.fairness.bucket_s if args.bucket is None else args.bucket
    fraction = config.fairness.fraction if args.fraction is None else args.fraction
    fair = analytics.fairness_report(result.snapshot.allocations, result.idle, bucket_s=bucket_s, fraction=fraction)
    if args.store_records:
        docs = fairness_docs(fair.shares, fair.buckets, pool=config.pool.name, probe=f"fairacct@{socket.gethostname()}")
        with Outbox(config.probe.state_dir / "outbox.sqlite") as outbox:
            outbox.commit(docs, {})
            sink = open_sink(config.store.url, base=config.probe.state_dir, auth=config.store.auth())
            try:
                outbox.flush(sink)
            finally:
                sink.close()
    return analytics_views.fairness_json(fair), analytics_views.fairness_sections(fair)


def _speed(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    try:
        speed = float(value)
    except ValueError:
        speed = float("nan")
    if not name or not speed > 0:
        raise ConfigError(f"--speed must be CLASS=SPEED with a speed greater than 0, got {text!r}")
    return name, speed


def _nonzero(counts: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _read_summary(result: Reading) -> str:
    lines = []
    if result.snapshot is not None:
        s, a = result.snapshot.slots, result.snapshot.allocations
        types = ", ".join(f"{n} {str(k).lower()}" for k, n in s["slot_type"].value_counts().items())
        lines.append(f"{len(s)} slots ({types}), {len(a)} allocations")
    if result.idle is not None:
        lines.append(f"{int(result.idle['count'].sum())} idle jobs in {len(result.idle)} autoclusters")
    if result.jobs is not None:
        lines.append(f"{len(result.jobs)} jobs from the history")
    return "\n".join(lines)


def _require(value: object, key: str, option: str) -> None:
    if not value:
        raise ConfigError(f"no input: set {key} in the configuration or give {option}")


def _store_cycle(
    config: ProbeConfig, strict: bool | None
) -> tuple[Cycle, Delivery, OutboxStatus, list[dict[str, Any]]]:
    """probe once: the cycle, committed to the outbox whatever the store does, then sent if it
    can be; the outbox afterwards, and its latest dead letter."""
    state = config.probe.state_dir
    url = config.store.url
    _warn_loose_token(config)
    check_writable(state, "probe.state_dir")
    with hold_state_dir(state, "probe.state_dir"), _history_progress(config) as pool:
        sink = open_sink(url, base=state, auth=config.store.auth())  # a missing token: refused before the outbox
        try:
            with Outbox(state / "outbox.sqlite") as outbox:
                cycle, delivery = run_once(
                    config, outbox, sink, probe=f"fairacct@{socket.gethostname()}", strict=strict, pool=pool,
                    check=lambda s: _installed(ensure_templates(s, url, install=config.store.install_templates)),
                )  # fmt: skip
                return cycle, delivery, outbox.status(), outbox.dead_letters(limit=1)
        finally:
            sink.close()


@contextlib.contextmanager
def _history_progress(config: ProbeConfig) -> Iterator[LivePool | None]:
    """The live pool of ``probe once``, counting the history it reads on a bar when stderr is a
    terminal (a first pass or a backfill can read years of jobs); None: the configuration's."""
    if not (config.sources.live and sys.stderr.isatty()):
        yield None
        return
    from probes.cli.progress import progress_counter
    from probes.pipeline.reading import live_pool

    pool = live_pool(config)
    with progress_counter("reading the history", "jobs") as advance:
        pool.on_progress = advance
        yield pool


def _installed(names: list[str]) -> None:
    if names:
        print(f"fairacct: installed index templates (store.install_templates): {', '.join(names)}", file=sys.stderr)


def _delivery(delivery: Delivery, status: OutboxStatus, last_dead: list[dict[str, Any]]) -> int:
    """What became of the cycle's records, on stderr when not everything was sent: the exit code."""
    dead = _nonzero(delivery.flushed.dead) if delivery.flushed else {}
    if dead:
        print(
            f"fairacct: the store refused {sum(dead.values())} record(s) for good, now dead letters "
            f"({', '.join(f'{n} {k}' for k, n in sorted(dead.items()))})"
            + (f", e.g. {last_dead[0]['kind']} {last_dead[0]['id']}: {last_dead[0]['error']}" if last_dead else "")
            + "; see `fairacct outbox --dead-letters`, fix the cause, then `fairacct outbox retry`",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if delivery.unsent:
        waiting = sum(status.depth.values())
        print(
            f"fairacct: {waiting} record(s) queued in the outbox, not sent: {delivery.unsent}; "
            "the next `probe once` or `probe run` sends them",
            file=sys.stderr,
        )
        return EXIT_QUEUED
    return EXIT_OK


def _serve(config: ProbeConfig, duration: float | None) -> int:
    """probe run: the service, logging to stderr one line per event, until a signal or --for."""
    from probes.service.scheduler import ProbeService  # APScheduler is imported only by the service

    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    _check_config(config)  # what `probe once` and `config check` refuse (a missing token), refused before starting
    _warn_loose_token(config)
    check_writable(config.probe.state_dir, "probe.state_dir")
    with hold_state_dir(config.probe.state_dir, "probe.state_dir"), _log_lines():
        service = ProbeService(config, probe=f"fairacct@{socket.gethostname()}")
        service.run(duration=duration)
    return EXIT_OK


@contextlib.contextmanager
def _log_lines() -> Iterator[None]:
    """Log INFO and above to stderr, one line per event (:class:`_LineFormatter`), while inside."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LineFormatter("%(asctime)s %(name)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%SZ"))
    root = logging.getLogger()
    level = root.level
    # httpx logs every request at INFO: a line per POST of the probe's flushes; its warnings stay
    logging.getLogger("httpx").setLevel(logging.WARNING)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def collector_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """collector serve: the [collector] section, with its store [collector.store], is the server's settings."""
    from collector.server import serve  # Starlette and uvicorn only for the service

    settings = config.collector_settings(store_url=args.store)
    if config.collector_store_from_probe:
        print(f"fairacct: note: {COLLECTOR_STORE_NOTE}", file=sys.stderr)
    check_writable(settings.state_dir, "collector.state_dir")
    with hold_state_dir(settings.state_dir, "collector.state_dir"):  # before its outbox or store is opened
        sink = open_sink(settings.store.url, base=settings.state_dir, auth=settings.store.auth())
        try:
            ensure_templates(sink, settings.store.url, install=settings.store.install_templates)
        finally:
            sink.close()
        with _log_lines():
            serve(settings)
    return EXIT_OK


class _LineFormatter(logging.Formatter):
    """``2026-11-21T14:00:00Z fairacct.service INFO snapshot: ...``: UTC, one line per event
    (a traceback's lines are joined with ' | '), as journald and log shippers read them."""

    # logging's documented way to log in UTC
    converter = time.gmtime  # type: ignore[assignment]

    def format(self, record: logging.LogRecord) -> str:
        return " | ".join(line for line in super().format(record).splitlines() if line.strip())


def _check_config(config: ProbeConfig) -> None:
    """What the commands check beyond the file's own validation: the sources go together, and
    the store's settings make a sink (secrets read, TLS set up; nothing is connected to, and
    the embedded store's file is not created)."""
    check_sources(config)
    if sqlite_path(config.store.url, config.probe.state_dir) is None:
        open_sink(config.store.url, base=config.probe.state_dir, auth=config.store.auth()).close()


def _warn_loose_token(config: ProbeConfig) -> None:
    """A warning on stderr when the token a probe sends with can be read by other users."""
    if not (config.store.url.startswith("collector+") and config.store.token_file):
        return
    from collector.sinks.http import loose_token  # httpx: only for a collector store

    if (warning := loose_token(Path(config.store.token_file))) is not None:
        print(f"fairacct: warning: {warning}", file=sys.stderr)


def store_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """records, outbox, mappings: commands on the store and the outbox, not on sources."""
    state = config.probe.state_dir
    if args.command == "outbox":
        with Outbox(state / "outbox.sqlite") as outbox:
            if args.action == "retry":
                moved = outbox.retry_dead_letters(args.kind)
                doc = {"retried": moved}
                text = (
                    f"put back in the outbox: {', '.join(f'{n} {k}' for k, n in moved.items())}; "
                    "the next `probe once` or flush of `probe run` sends them"
                    if moved
                    else "no dead letters" + (f" of kind {args.kind}" if args.kind else "")
                )
            else:
                listed = outbox.dead_letters(None if args.dead_letters else 20, kind=args.kind)
                doc, text = views.outbox_view(outbox.status(), listed)
        print(json.dumps(doc, indent=1) if args.json else text)
        return EXIT_OK
    from probes.cli.stores import store_of

    store, base = store_of(args.config, config, args.store)  # a collector's configuration: the collector's store
    sink = open_sink(store.url, base=base, auth=store.auth(), create=args.command == "mappings")
    try:
        if args.command == "mappings":
            installed = sink.install_templates()
            print(json.dumps({"installed": installed}) if args.json else f"installed templates: {', '.join(installed)}")
            return EXIT_OK
        docs = sink.query(
            args.kind, since=_time_arg(args.since, "--since"), until=_time_arg(args.until, "--until"), limit=args.limit
        )
    finally:
        sink.close()
    print(json.dumps(docs, indent=1) if args.json else views.docs_table(args.kind, docs))
    return EXIT_OK


def _time_arg(value: str | None, option: str) -> str | None:
    """A time option as the ISO-8601 UTC form records carry."""
    return None if value is None else iso_utc([parse_time(value, option)])[0]


def _report_problems(result: Reading, config: ProbeConfig, args: argparse.Namespace) -> None:
    """One line on stderr per problem. The probe keeps malformed ads in its state directory's
    quarantine; a command that only reads keeps them only where ``--quarantine`` says."""
    if args.command == "probe":
        quarantine: Path | None = config.probe.state_dir / "quarantine"
    else:
        quarantine = Path(args.quarantine) if getattr(args, "quarantine", None) else None
    for line in problem_lines(result.reports, result.failures, quarantine, datetime.now(UTC)):
        print(f"fairacct: {line}", file=sys.stderr)
