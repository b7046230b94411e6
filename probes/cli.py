"""The ``fairacct`` command line. Only this module prints and exits.

Library code raises :class:`~collector.errors.FairacctError`; here it becomes one line on
stderr and an exit code: 2 for a bad command line or configuration, 1 for a source or store
that failed, 0 otherwise (malformed ads that were quarantined are not a failure).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


from collector.errors import ConfigError, FairacctError, SinkError
from collector.outbox import Outbox
from collector.records import KINDS, iso_utc
from collector.sinks import open_sink
from probes.config import OVERRIDES, ProbeConfig, apply_overrides, load_config
from probes import usage, usage_views, views
from probes.cycle import CycleResult, read_sources, run_once
from probes.overhead import overhead_report, snapshot_bills
from probes.quarantine import write_quarantine

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

def _package_version() -> str:
    try:
        return version("fairacct")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="TOML configuration file (see config/example.toml)")
    for o in OVERRIDES:
        if o.many:
            common.add_argument(o.option, metavar=o.metavar, action="append", default=[], help=o.help)
        else:
            common.add_argument(o.option, metavar=o.metavar, help=o.help)
    common.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    common.add_argument("--strict", action="store_true", default=None, help="stop at the first malformed ad")

    parser = argparse.ArgumentParser(prog="fairacct", description="HTCondor/glideinWMS accounting probe.")
    parser.add_argument("--version", action="version", version=f"fairacct {_package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("slots", parents=[common], help="read startd ads into the slots and allocations tables")
    sub.add_parser("idle", parents=[common], help="read the queue into the idle table (autoclusters)")
    sub.add_parser("jobs", parents=[common], help="read job history into the jobs table")
    overhead = sub.add_parser("overhead", parents=[common], help="true overhead of each slot in canonical units, and its histogram")
    overhead.add_argument(
        "--exact", action="store_true", help="also evaluate idle jobs' Requirements against the slots (classad2)"
    )
    sub.add_parser("bill", parents=[common], help="proportional bills of the running jobs")
    for name, text in (
        ("penalty", "multi-resource penalty of each job, beside the metrics it replaces (seed 000)"),
        ("fairshare", "Maui-style fairshare by credential: diagnose -f, FS.<epoch> files, JSON (seed 004)"),
    ):
        usage_cmd = sub.add_parser(name, parents=[common], help=text)
        usage_cmd.add_argument("--swf", metavar="FILE", help="SWF workload log (or MetaCentrum's 21-field variant) instead of --history")
        usage_cmd.add_argument("--machines", metavar="FILE", help="Alea machines file instead of --status-file")
        usage_cmd.add_argument("--ram-unit", choices=("auto", "KB", "MB", "GB"), help="unit of RAM in the machines file (default: machines.ram_unit)")
        if name == "fairshare":
            usage_cmd.add_argument("--at", metavar="TIME", help="when to evaluate: UNIX seconds or ISO-8601 (default: the end of the last job)")
            usage_cmd.add_argument("--fs-dir", metavar="DIR", help="also write Maui's FS.<epoch> window files into DIR")
    probe = sub.add_parser("probe", help="run the probe")
    probe_sub = probe.add_subparsers(dest="action", required=True, metavar="ACTION")
    probe_sub.add_parser("once", parents=[common], help="run one cycle into the store and print what it found")
    run = probe_sub.add_parser("run", parents=[common], help="run the probe service (APScheduler) until SIGTERM or SIGINT")
    run.add_argument("--for", dest="duration", type=float, metavar="SECONDS", help="stop after SECONDS (a demo, a test)")
    records = sub.add_parser("records", parents=[common], help="print stored records of one kind")
    records.add_argument("kind", choices=list(KINDS), help="record kind")
    records.add_argument("--since", metavar="TIME", help="records at or after TIME (ISO-8601 UTC or UNIX seconds)")
    records.add_argument("--until", metavar="TIME", help="records before TIME")
    records.add_argument("--limit", type=int, metavar="N", help="at most N records")
    sub.add_parser("outbox", parents=[common], help="depth, oldest item and dead letters of the outbox")
    mappings = sub.add_parser("mappings", help="Elasticsearch index templates")
    mappings_sub = mappings.add_subparsers(dest="action", required=True, metavar="ACTION")
    mappings_sub.add_parser("install", parents=[common], help="install (or update) the index templates of every kind")
    collector_cmd = sub.add_parser("collector", help="the collector service")
    collector_sub = collector_cmd.add_subparsers(dest="action", required=True, metavar="ACTION")
    collector_sub.add_parser(
        "serve", parents=[common], help="take records from probes over HTTP ([collector] section) until SIGTERM or SIGINT"
    )
    config = sub.add_parser("config", help="configuration")
    config_sub = config.add_subparsers(dest="action", required=True, metavar="ACTION")
    config_sub.add_parser("check", parents=[common], help="validate the configuration and print it")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = apply_overrides(load_config(args.config), vars(args))
        return _run(args, config)
    except ConfigError as exc:
        print(f"fairacct: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FairacctError as exc:
        print(f"fairacct: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `fairacct jobs | head`
        return EXIT_OK


def _run(args: argparse.Namespace, config: ProbeConfig) -> int:
    if args.command == "config":
        print(json.dumps(config.model_dump(mode="json"), indent=2))
        return EXIT_OK
    if args.command in ("penalty", "fairshare"):
        return _usage(args, config)
    if args.command in ("records", "outbox", "mappings"):
        return _store_command(args, config)
    if args.command == "probe" and args.action == "run":
        return _serve(config, args.duration)
    if args.command == "collector":
        return _collector_serve(config)
    if args.command == "probe":
        _require(
            config.sources.live or config.sources.status_files or config.sources.history or config.sources.idle_files,
            "sources",
            "--status-file, --idle-file or --history (or set sources.live = true)",
        )
        result = _store_cycle(config, args.strict)
    else:
        key, option = _INPUT[args.command]
        _require(getattr(config.sources, key), f"sources.{key}", option)
        wanted = _READS[args.command]
        only = {k: getattr(config.sources, k) if k in wanted else [] for k in ("status_files", "idle_files", "history")}
        config = config.model_copy(update={"sources": config.sources.model_copy(update=only)})
        result = read_sources(config, strict=args.strict)
    _report_problems(result, config)
    doc, sections = _show(args, result, config)
    print(json.dumps(doc, indent=1) if args.json else views.render(sections), end="\n" if args.json else "")
    return EXIT_OK


def _show(args: argparse.Namespace, result: CycleResult, config: ProbeConfig) -> tuple[dict[str, Any], list[views.Section]]:
    """The JSON document and the tables a command prints."""
    command = args.command
    if command in ("slots", "idle", "jobs"):
        return views.read_json(result, slots=command == "slots"), views.read_sections(result, slots=command == "slots")
    snapshot = result.snapshot
    if command == "overhead":
        assert snapshot is not None
        report = overhead_report(snapshot, config, result.idle, exact=args.exact)
        return views.overhead_json(report), views.overhead_sections(report)
    if command == "bill":
        assert snapshot is not None
        nodes, bills = snapshot_bills(snapshot, config)
        return views.bill_json(nodes, bills), views.bill_sections(nodes, bills)
    # probe once: what was read, the snapshot's accounting, and what became of the records
    flushed = result.flushed
    doc: dict[str, Any] = {
        "read": views.read_json(result, slots=False)["read"],
        "enqueued": result.enqueued,
        "sent": _nonzero(flushed.sent) if flushed else {},
        "retry": _nonzero(flushed.retried) if flushed else {},
        "dead": _nonzero(flushed.dead) if flushed else {},
    }
    sections: list[views.Section] = [("read", _read_summary(result))]
    if snapshot is not None:
        report = overhead_report(snapshot, config, result.idle)
        nodes, bills = snapshot_bills(snapshot, config)
        doc |= {"overhead": views.overhead_json(report), "bill": views.bill_json(nodes, bills)}
        sections += views.overhead_sections(report, per_slot=False) + views.bill_sections(nodes, bills, per_job=False)
    sections.append(("records", views.records_summary(result, config.store.url)))
    return doc, sections


def _usage(args: argparse.Namespace, config: ProbeConfig) -> int:
    """The penalty and fairshare commands: jobs from --history or --swf, machines from
    --machines or --status-file."""
    if args.swf and args.history:
        raise ConfigError("give --history or --swf, not both")
    if args.machines and args.status_file:
        raise ConfigError("give --machines or --status-file, not both")
    inputs = usage.read_usage_inputs(
        config, swf=args.swf, machines_file=args.machines, ram_unit=args.ram_unit, strict=args.strict,
        need_machines=args.command == "penalty",
    )  # fmt: skip
    _report_problems(CycleResult(reports=inputs.reports), config)
    if args.command == "penalty":
        report = usage.penalty_report(inputs, config)
        doc, sections = usage_views.penalty_json(report), usage_views.penalty_sections(report)
    else:
        at = usage.parse_time(args.at) if args.at else None
        fs = usage.fairshare_report(inputs, config, at=at)
        written = [str(p) for p in usage.write_fs_files(fs.result, args.fs_dir)] if args.fs_dir else []
        doc, sections = usage_views.fairshare_json(fs) | {"fs_files": written}, usage_views.fairshare_sections(fs, written=written)
    if args.json:
        for note in doc.get("notes", []):
            print(f"fairacct: note: {note}", file=sys.stderr)
    print(json.dumps(doc, indent=1) if args.json else views.render(sections), end="\n" if args.json else "")
    return EXIT_OK


def _nonzero(counts: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _read_summary(result: CycleResult) -> str:
    lines = []
    if result.snapshot is not None:
        s, a = result.snapshot.slots, result.snapshot.allocations
        lines.append(f"{len(s)} slots ({', '.join(f'{n} {k.lower()}' for k, n in s['slot_type'].value_counts().items())}), {len(a)} allocations")
    if result.idle is not None:
        lines.append(f"{int(result.idle['count'].sum())} idle jobs in {len(result.idle)} autoclusters")
    if result.jobs is not None:
        lines.append(f"{len(result.jobs)} jobs from the history")
    return "\n".join(lines)


# per command: the input it needs, and the sources it reads (idle demand from a
# condor_q -autocluster dump needs the running jobs of a status dump)
_INPUT = {
    "slots": ("status_files", "--status-file"),
    "idle": ("idle_files", "--idle-file"),
    "jobs": ("history", "--history"),
    "overhead": ("status_files", "--status-file"),
    "bill": ("status_files", "--status-file"),
}
_READS = {
    "slots": ("status_files",),
    "idle": ("idle_files", "status_files"),
    "jobs": ("history",),
    "overhead": ("status_files", "idle_files"),
    "bill": ("status_files",),
}


def _require(value: object, key: str, option: str) -> None:
    if not value:
        raise ConfigError(f"no input: set {key} in the configuration or give {option}")


def _store_cycle(config: ProbeConfig, strict: bool | None) -> CycleResult:
    state = config.probe.state_dir
    with Outbox(state / "outbox.sqlite") as outbox:
        sink = open_sink(config.store.url, base=state, auth=config.store.auth())
        try:
            _check_templates(sink, config.store.url)
            return run_once(config, outbox, sink, probe=f"fairacct@{socket.gethostname()}", strict=strict)
        finally:
            sink.close()


def _serve(config: ProbeConfig, duration: float | None) -> int:
    """probe run: the service, logging to stderr one line per event, until a signal or --for."""
    from probes.service import ProbeService  # APScheduler is imported only by the service

    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    with _log_lines():
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
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _collector_serve(config: ProbeConfig) -> int:
    """collector serve: the [collector] section and the store become the server's settings."""
    from collector.server import ServerSettings, serve  # Starlette and uvicorn only for the service

    if config.store.url.startswith("collector+"):
        raise ConfigError(f"store.url: the collector needs a store of its own, got another collector: {config.store.url!r}")
    c = config.collector
    settings = ServerSettings(
        token_dir=c.token_dir,
        state_dir=c.state_dir,
        store_url=config.store.url,
        store_options=config.store.auth(),
        host=c.listen_address,
        port=c.port,
        tls_cert_file=Path(c.tls_cert_file) if c.tls_cert_file else None,
        tls_key_file=Path(c.tls_key_file) if c.tls_key_file else None,
        gratia_senders=tuple(c.gratia_senders),
        max_body_bytes=int(c.max_body_size),
        max_outbox_depth=c.max_outbox_depth,
        flush_every_s=c.flush_every_s,
        flush_batch_size=c.flush_batch_size,
        store_stale_s=c.store_stale_s,
    )
    sink = open_sink(settings.store_url, base=settings.state_dir, auth=settings.store_options)
    try:
        _check_templates(sink, settings.store_url)
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


def _check_templates(sink: object, url: str) -> None:
    """Elasticsearch must have fairacct's index templates before records go in, or it would
    guess the fields' types from the first documents."""
    check = getattr(sink, "check_templates", None)
    if check is None:
        return
    found = check()
    if not found.ok:
        problems = [f"missing for {', '.join(found.missing)}"] if found.missing else []
        problems += [f"{kind}: {what}" for kind, what in found.differ.items()]
        raise SinkError(f"{url}: index templates {'; '.join(problems)}: run `fairacct mappings install` first")


def _store_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    """records, outbox, mappings: commands on the store and the outbox, not on sources."""
    state = config.probe.state_dir
    if args.command == "outbox":
        with Outbox(state / "outbox.sqlite") as outbox:
            doc, text = views.outbox_view(outbox.status(), outbox.dead_letters())
        print(json.dumps(doc, indent=1) if args.json else text)
        return EXIT_OK
    sink = open_sink(config.store.url, base=state, auth=config.store.auth())
    try:
        if args.command == "mappings":
            install = getattr(sink, "install_templates", None)
            if install is None:
                raise ConfigError(f"store.url: {config.store.url!r} is the embedded store; index templates are for Elasticsearch")
            installed = install()
            print(json.dumps({"installed": installed}) if args.json else f"installed templates: {', '.join(installed)}")
            return EXIT_OK
        docs = sink.query(args.kind, since=_time_arg(args.since), until=_time_arg(args.until), limit=args.limit)  # type: ignore[attr-defined]
    finally:
        sink.close()
    print(json.dumps(docs, indent=1) if args.json else views.docs_table(args.kind, docs))
    return EXIT_OK


def _time_arg(value: str | None) -> str | None:
    """ISO-8601 UTC or UNIX seconds -> the ISO form records carry."""
    if value is None:
        return None
    try:
        return iso_utc([float(value)])[0]
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"expected a time as ISO-8601 (2026-11-21T14:00:00Z) or UNIX seconds, got {value!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _report_problems(result: CycleResult, config: ProbeConfig) -> None:
    now = datetime.now(UTC)
    for source, why in sorted(result.failures.items()):  # live schedds that did not answer
        print(f"fairacct: {source} skipped: {why}", file=sys.stderr)
    for what, report in result.reports.items():
        if report.malformed:
            where = write_quarantine(report.malformed, config.probe.state_dir / "quarantine", now)
            first = report.malformed[0].error()
            print(
                f"fairacct: {len(report.malformed)} malformed {what} ad(s) skipped, the first: {first}; "
                f"quarantined in {where}",
                file=sys.stderr,
            )
        for reason, count in sorted(report.rejects.items()):
            print(f"fairacct: {what}: {count} value(s) ignored: {reason}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
