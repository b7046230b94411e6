"""The ``fairacct`` command line. Only this module prints and exits.

Library code raises :class:`~collector.errors.FairacctError`; here it becomes one line on
stderr and an exit code: 2 for a bad command line or configuration, 1 for a source or store
that failed, 0 otherwise (malformed ads that were quarantined are not a failure).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from collector.errors import ConfigError, FairacctError
from collector.store import EmbeddedStore
from probes.config import OVERRIDES, ProbeConfig, apply_overrides, load_config
from probes import views
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
    probe = sub.add_parser("probe", help="run the probe")
    probe_sub = probe.add_subparsers(dest="action", required=True, metavar="ACTION")
    probe_sub.add_parser("once", parents=[common], help="run one cycle into the store and print what it found")
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
    if args.command == "probe":
        _require(
            config.sources.status_files or config.sources.history or config.sources.idle_files,
            "sources",
            "--status-file, --idle-file or --history",
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
    # probe once: what was read and stored, and the snapshot's accounting
    doc: dict[str, Any] = {"read": views.read_json(result, slots=False)["read"], "stored": result.stored}
    sections: list[views.Section] = [("read", _read_summary(result))]
    if snapshot is not None:
        report = overhead_report(snapshot, config, result.idle)
        nodes, bills = snapshot_bills(snapshot, config)
        doc |= {"overhead": views.overhead_json(report), "bill": views.bill_json(nodes, bills)}
        sections += views.overhead_sections(report, per_slot=False) + views.bill_sections(nodes, bills, per_job=False)
    path = result.stored.pop("_path", None)
    counts = ", ".join(f"{k} {v}" for k, v in result.stored.items())
    sections.append(("stored", f"{path}: {counts}"))
    return doc, sections


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
    url = config.store.url
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"store.url: only the embedded store (sqlite:///PATH) is available yet, got {url!r}")
    path = Path(url.removeprefix("sqlite:///"))
    if not path.is_absolute():
        path = config.probe.state_dir / path
    with EmbeddedStore(path) as store:
        result = run_once(config, store, probe=f"fairacct@{socket.gethostname()}", strict=strict)
        result.stored = {kind: store.count(kind) for kind in result.stored} | {"_path": str(path)}  # type: ignore[dict-item]
    return result


def _report_problems(result: CycleResult, config: ProbeConfig) -> None:
    now = datetime.now(UTC)
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
