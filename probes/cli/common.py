"""What the commands (:mod:`probes.cli.commands`) share: the exit codes, printing a result,
reading sources and saying what went wrong with them, the store a command reads, and the
service commands' log lines.

The exit codes, which the ``fairacct`` script (or ``python -m probes``) exits with: 2 for a bad
command line (argparse's own exit) or configuration, 1 for a source or store that failed (or
records the store refused for good: dead letters), 3 for ``probe once`` when the cycle was
committed to the outbox but not sent (the store did not answer: the next ``probe once`` or
``probe run`` sends it), 0 otherwise (malformed ads that were quarantined are not a failure).
:func:`probes.cli.running.run` alone turns errors into them.

The registry imports every command module, and they import this one: what is heavy (pandas,
the readers, the stores' clients) is imported inside the functions that use it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import logging.handlers
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError

if TYPE_CHECKING:
    from collector.settings import SinkSettings
    from collector.sinks import Sink
    from probes.cli.views import Section
    from probes.config import ProbeConfig
    from probes.pipeline.reading import Reading
    from probes.pipeline.usage import UsageInputs

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_QUEUED",
    "EXIT_USAGE",
    "check_config",
    "check_source_files",
    "is_collectors",
    "log_lines",
    "nonzero",
    "opened_store",
    "print_doc",
    "print_read",
    "print_text",
    "probe_name",
    "read",
    "report_problems",
    "require",
    "shown_rows",
    "store_of",
    "time_arg",
    "usage_inputs",
    "warn_loose_token",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_QUEUED = 0, 1, 2, 3


# -- printing ------------------------------------------------------------------------------------


def print_doc(args: argparse.Namespace, doc: dict[str, Any], sections: list[Section]) -> None:
    """A command's JSON document with ``--json``, else its tables."""
    from probes.cli import views

    print(json.dumps(doc, indent=1) if args.json else views.render(sections), end="\n" if args.json else "")


def print_text(args: argparse.Namespace, doc: object, text: str) -> None:
    """A command's JSON document with ``--json``, else its text."""
    print(json.dumps(doc, indent=1) if args.json else text)


def print_read(args: argparse.Namespace, result: Reading, *, slots: bool) -> None:
    """slots, idle: every row as JSON, streamed, or the first TABLE_ROWS of each table
    (``--limit`` says otherwise in both; 0 is every row); the slots' tables only with ``slots``."""
    from probes.cli import views

    limit = shown_rows(args)
    if args.json:
        views.write_read_json(sys.stdout, result, slots=slots, limit=limit)
    else:
        print(views.render(views.read_sections(result, slots=slots, limit=limit)), end="")


def shown_rows(args: argparse.Namespace) -> int | None:
    """The rows slots, idle and jobs show of each table (None: all): ``--limit`` (0: all), else
    every row as JSON and the first TABLE_ROWS of a table."""
    from probes.cli.options import TABLE_ROWS

    if args.limit is not None:
        return int(args.limit) or None
    return None if args.json else TABLE_ROWS


def nonzero(counts: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


# -- inputs --------------------------------------------------------------------------------------


def require(value: object, key: str, option: str) -> None:
    """A :class:`ConfigError` when an input the command needs (``value``) is given neither in
    the configuration (``key``) nor on the command line (``option``)."""
    if not value:
        raise ConfigError(f"no input: set {key} in the configuration or give {option}")


def read(args: argparse.Namespace, config: ProbeConfig, *reads: str, option: str) -> Reading:
    """The sources ``reads`` (settings of ``[sources]``), of which the first must be given (in
    the configuration or as ``option``); the problems on stderr."""
    from probes.pipeline.reading import read_sources

    require(getattr(config.sources, reads[0]), f"sources.{reads[0]}", option)
    result = read_sources(config, strict=args.strict, only=reads)
    report_problems(result, args)
    return result


def report_problems(result: Reading, args: argparse.Namespace, *, quarantine: Path | None = None) -> None:
    """One line on stderr per problem. The probe keeps malformed ads in its state directory's
    quarantine (its ``quarantine``); a command that only reads keeps them only where
    ``--quarantine`` says."""
    from datetime import UTC, datetime

    from probes.sources.report import problem_lines

    if quarantine is None and getattr(args, "quarantine", None):
        quarantine = Path(args.quarantine)
    for line in problem_lines(result.reports, result.failures, quarantine, datetime.now(UTC)):
        print(f"fairacct: {line}", file=sys.stderr)


def usage_inputs(args: argparse.Namespace, config: ProbeConfig, *, need_machines: bool) -> UsageInputs:
    """penalty, fairshare: jobs from --history or --swf, machines from --machines or
    --status-file; the problems on stderr."""
    from probes.pipeline import usage
    from probes.pipeline.reading import Reading

    if args.swf and args.history:
        raise ConfigError("give --history or --swf, not both")
    if args.machines and args.status_file:
        raise ConfigError("give --machines or --status-file, not both")
    inputs = usage.read_usage_inputs(
        config, swf=args.swf, machines_file=args.machines, ram_unit=args.ram_unit, strict=args.strict,
        need_machines=need_machines,
    )  # fmt: skip
    report_problems(Reading(reports=inputs.reports), args)
    return inputs


def time_arg(value: str | None, option: str) -> str | None:
    """A time option as the ISO-8601 UTC form records carry."""
    from collector.records import iso_utc
    from probes.cli.times import parse_time

    return None if value is None else iso_utc([parse_time(value, option)])[0]


# -- the store and the configuration -------------------------------------------------------------


def store_of(args: argparse.Namespace, config: ProbeConfig) -> tuple[SinkSettings, Path]:
    """The store a command reads, and the directory a relative ``sqlite:///`` store is under.
    A collector's configuration (``--config`` with a ``[collector]`` section and no ``[probe]``)
    names the collector's store (``[collector.store]``, or ``[store]`` in a file written before
    that section; the command's ``--store`` replaces its URL) under the collector's state
    directory, where its service keeps it; any other names the probe's ``[store]``."""
    if is_collectors(args):
        return config.collector_settings(getattr(args, "store", None)).store, config.collector.state_dir
    return config.store, config.probe.state_dir


def is_collectors(args: argparse.Namespace) -> bool:
    """Whether ``--config`` is a collector's configuration: a ``[collector]`` section and no ``[probe]``."""
    import tomllib

    raw: dict[str, object] = {}
    if args.config:
        try:
            raw = tomllib.loads(Path(args.config).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):  # load_config read it already
            raw = {}
    return "collector" in raw and "probe" not in raw


@contextlib.contextmanager
def opened_store(store: SinkSettings, base: Path, *, create: bool) -> Iterator[Sink]:
    """The store, opened (:func:`collector.sinks.open_store`) and closed after; without
    ``create`` an embedded store that does not exist is an error naming its path (reading one a
    typo would create says "0 rows")."""
    from collector.sinks import Opening, open_store

    sink = open_store(store, Opening(base, create=create))
    try:
        yield sink
    finally:
        sink.close()


def probe_name() -> str:
    """The ``probe`` field of the records this host makes."""
    return f"fairacct@{socket.gethostname()}"


def check_config(config: ProbeConfig) -> None:
    """What the commands check beyond the file's own validation: the sources go together, the
    user-vo-map can be read (not a FIFO nor a device, nor too large), and the store's settings
    make a sink (secrets read, TLS set up; nothing is connected to, and
    the embedded store's file is not created)."""
    from collector.sinks import open_store, sqlite_path
    from probes.pipeline.reading import check_sources

    check_sources(config)
    if config.credentials.user_vo_map:  # read as every command that reads jobs reads it, key named
        from probes.sources.user_vo_map import read_user_vo_map

        read_user_vo_map(config.credentials.user_vo_map)
    if sqlite_path(config.store.url, config.probe.state_dir) is None:
        open_store(config.store, config.opening()).close()


def check_source_files(config: ProbeConfig) -> None:
    """Each file source of ``[sources]`` can be opened, each history folder listed, and each
    schedd's history file of ``pool.history_files`` (with its rotations) opened, by the user
    running the check (the service's account, run as it); a :class:`ConfigError` naming
    the key otherwise. Only ``config check`` asks it: the service keeps running when a source
    fails (the failure is a log line and a count), as a folder may be mounted later."""
    from probes.errors import SourceError
    from probes.pipeline.reading import FILE_SOURCES
    from probes.sources.history_files import schedd_history_files
    from probes.sources.history_folder import list_folder
    from probes.sources.inputs import open_input

    for key in FILE_SOURCES:
        for i, path in enumerate(getattr(config.sources, key)):
            try:
                if key == "history" and path.is_dir():
                    list_folder(path)
                else:
                    open_input(path, "a history" if key == "history" else "ClassAds").close()
            except SourceError as exc:
                raise ConfigError(f"sources.{key}[{i}]: {exc}") from exc
    for name, path in config.pool.history_files.items():  # each file of a schedd's history opened
        try:
            for file in schedd_history_files(path):
                open_input(file, "a schedd's history").close()
        except SourceError as exc:
            raise ConfigError(f"pool.history_files.{name}: {exc}") from exc


def warn_loose_token(config: ProbeConfig) -> None:
    """A warning on stderr when the token a probe sends with can be read by other users."""
    if not (config.store.kind == "collector" and config.store.token_file):
        return
    from collector.sinks.http import loose_token  # httpx: only for a collector store

    if (warning := loose_token(Path(config.store.token_file))) is not None:
        print(f"fairacct: warning: {warning}", file=sys.stderr)


# -- the services' log ---------------------------------------------------------------------------


@contextlib.contextmanager
def log_lines(level: str = "INFO", form: str = "text", file: str = "") -> Iterator[None]:
    """Log ``level`` and above to stderr (or appended to ``file``, reopened when a rotation moves
    it: a daemon of condor_master logs under $(LOG) as HTCondor's own do), one line per event
    while inside: text (:class:`_LineFormatter`) or, with ``form`` ``json``, one JSON object
    (:class:`_JsonFormatter`)."""
    handler: logging.Handler
    if file:
        try:
            handler = logging.handlers.WatchedFileHandler(file, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"log.file: cannot append to {file} ({exc.strerror or exc})") from None
    else:
        handler = logging.StreamHandler(sys.stderr)
    if form == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(_LineFormatter("%(asctime)s %(name)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%SZ"))
    handler.addFilter(_named_for_what_it_says)
    root = logging.getLogger()
    previous = root.level
    # httpx logs every request at INFO: a line per POST of the probe's flushes; its warnings stay
    logging.getLogger("httpx").setLevel(logging.WARNING)
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(previous)


def _named_for_what_it_says(record: logging.LogRecord) -> bool:
    """uvicorn logs its start and stop (``Started server process``, ``Application startup
    complete``) as ``uvicorn.error``, its general logger: said as ``uvicorn``, so that a grep of
    the log for errors finds the errors, not every normal start."""
    if record.name == "uvicorn.error":
        record.name = "uvicorn"
    return True


class _JsonFormatter(logging.Formatter):
    """``{"time": "2026-11-21T14:00:00Z", "logger": "fairacct.service", "level": "INFO",
    "message": "..."}`` (and ``exception``, the traceback's text, when there is one): one object
    per line, as journald's JSON and log shippers read them."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "logger": record.name,
            "level": record.levelname,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class _LineFormatter(logging.Formatter):
    """``2026-11-21T14:00:00Z fairacct.service INFO snapshot: ...``: UTC, one line per event
    (a traceback's lines are joined with ' | '), as journald and log shippers read them."""

    # logging's documented way to log in UTC
    converter = time.gmtime  # type: ignore[assignment]

    def format(self, record: logging.LogRecord) -> str:
        return " | ".join(line for line in super().format(record).splitlines() if line.strip())
