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
from probes.cycle import CycleResult, read_sources, run_once
from probes.quarantine import write_quarantine
from probes.sources.classad import ReadReport

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

SLOT_VIEW = (
    "name", "slot_type", "site", "partition", "total_cpus", "total_memory", "total_gpus",
    "unallocated_cpus", "unallocated_memory", "unallocated_gpus", "n_dynamic",
)  # fmt: skip
ALLOCATION_VIEW = ("name", "parent", "job_id", "user", "group", "cpus", "memory", "gpus")
IDLE_VIEW = ("schedd", "autocluster_id", "request_cpus", "request_memory", "request_disk", "request_gpus", "count", "users")
JOB_VIEW = ("job_id", "user", "group", "project", "cpus", "memory", "gpus", "status", "walltime_s", "cpu_time_s", "site")


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
        _require(config.sources.status_files or config.sources.history or config.sources.idle_files, "sources", "--status-file, --idle-file or --history")
        result = _store_cycle(config, args.strict)
    else:
        key, option = _INPUT[args.command]
        _require(getattr(config.sources, key), f"sources.{key}", option)
        wanted = _READS[args.command]
        only = {k: getattr(config.sources, k) if k in wanted else [] for k in ("status_files", "idle_files", "history")}
        config = config.model_copy(update={"sources": config.sources.model_copy(update=only)})
        result = read_sources(config, strict=args.strict)
    _report_problems(result, config)
    if args.json:
        print(json.dumps(_as_json(args.command, result), indent=1))
    else:
        _print_tables(args.command, result)
    return EXIT_OK


# per command: the input it needs, and the sources it reads (idle demand from a
# condor_q -autocluster dump needs the running jobs of a status dump)
_INPUT = {"slots": ("status_files", "--status-file"), "idle": ("idle_files", "--idle-file"), "jobs": ("history", "--history")}
_READS = {"slots": ("status_files",), "idle": ("idle_files", "status_files"), "jobs": ("history",)}


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


def _as_json(command: str, result: CycleResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if result.snapshot is not None and command in ("slots", "probe"):
        out["slots"] = _records(result.snapshot.slots)
        out["allocations"] = _records(result.snapshot.allocations)
    if result.idle is not None:
        out["idle"] = _records(result.idle.drop(columns=["example_job"]))
    if result.jobs is not None:
        out["jobs"] = _records(result.jobs)
    out["read"] = {
        what: {"ads": r.ads, "evaluated": r.evaluated, "malformed": len(r.malformed), "rejects": dict(r.rejects)}
        for what, r in result.reports.items()
    }
    if result.stored:
        out["stored"] = result.stored
    return out


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", double_precision=15))  # type: ignore[no-any-return]


def _print_tables(command: str, result: CycleResult) -> None:
    sections = []
    if result.snapshot is not None and command in ("slots", "probe"):
        slots, allocs = result.snapshot.slots, result.snapshot.allocations
        sections.append((f"{len(slots)} slots (partitionable and static)", _table(slots, SLOT_VIEW)))
        sections.append((f"{len(allocs)} allocations (dynamic slots)", _table(allocs, ALLOCATION_VIEW)))
    if result.idle is not None:
        jobs = int(result.idle["count"].sum()) if len(result.idle) else 0
        sections.append((f"{len(result.idle)} autoclusters of idle jobs ({jobs} jobs)", _table(result.idle, IDLE_VIEW)))
    if result.jobs is not None:
        sections.append((f"{len(result.jobs)} jobs", _table(result.jobs, JOB_VIEW)))
    for title, body in sections:
        print(f"== {title}")
        print(body)
        print()
    if result.stored:
        path = result.stored.get("_path")
        counts = ", ".join(f"{k} {v}" for k, v in result.stored.items() if k != "_path")
        print(f"stored in {path}: {counts}")


def _table(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    if not len(frame):
        return "(none)"
    view = frame.reindex(columns=list(columns)).copy()
    for col in view.columns:
        if pd.api.types.is_float_dtype(view[col]) and (view[col].dropna() % 1 == 0).all():
            view[col] = view[col].astype("Int64")
    return view.to_string(index=False, na_rep="-")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
