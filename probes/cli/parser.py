"""The ``fairacct`` command line's grammar: its commands, their options and their help.

It is read before anything heavy is imported. Every command is listed (``fairacct --help``),
but only the one being run gets its options: they name the settings' overrides, record kinds,
lab cases and what-if policies, whose modules import pandas, and ``fairacct --version`` or
``--help`` should not pay a second for them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

__all__ = ["COMMANDS", "TABLE_ROWS", "parse"]

COMMANDS = {
    "slots": "read startd ads into the slots and allocations tables",
    "idle": "read the queue into the idle table (autoclusters)",
    "jobs": "read job history into the jobs table",
    "overhead": "true overhead of each slot in canonical units, and its histogram",
    "bill": "proportional bills of the running jobs",
    "penalty": "multi-resource penalty of each job, beside the metrics it replaces (Klusacek & Rudova 2015)",
    "fairshare": "Maui-style fairshare by credential: diagnose -f, FS.<epoch> files, JSON (Maui Admin Guide, 6.3)",
    "efficiency": "efficiency by resource set; `efficiency whatif`: node-allocation policies (Jackson et al. 2001)",
    "fairness": "demand vs allocation, Jain's index and starvation per user (Sedighi et al. 2014)",
    "lab": "fair-share lab of Sedighi et al. 2014: Table 2.1, cases 1-5 under formula 2.1 and Maui fairshare",
    "probe": "run the probe",
    "records": "print stored records of one kind",
    "outbox": "depth, oldest item and dead letters of the outbox",
    "mappings": "Elasticsearch index templates",
    "collector": "the collector service",
    "config": "configuration",
    "summarize": "compute the daily summaries of a range of days in the store",
    "export": "usage per project, user, site and month for allocation committees",
    "report": "a static HTML report (plots and tables) of a range of days",
    "dashboards": "Kibana / OpenSearch Dashboards saved objects",
    "priority": "HTCondor priority sync: the fairshare state into the negotiator ([priority])",
    "slot-weight": "the SLOT_WEIGHT (Cpus, Memory, Disk) that approximates the penalty, standard job or bills, with its error",
}
"""Every command, and what ``fairacct --help`` says of it."""

_SOURCES = ("--status-file", "--idle-file", "--history")
_ALL = (*_SOURCES, "--store")
_READERS = {  # the commands that read sources and print what they read, and the sources each reads
    "slots": ("--status-file",),
    "idle": ("--idle-file", "--status-file"),
    "jobs": ("--history",),
    "overhead": ("--status-file", "--idle-file"),
    "bill": ("--status-file",),
}

TABLE_ROWS = 50
"""Rows of a table ``slots``, ``idle`` and ``jobs`` show unless ``--limit`` says otherwise: a
screenful, not a 40,000-row history (which ``--json`` or ``--limit 0`` print whole)."""


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line ``argv`` (default: the process's arguments) as a namespace; argparse
    prints the help, the version or the usage error and exits (2) where it must."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # the top-level parser has no option taking a value, so the first word is the command
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = argparse.ArgumentParser(prog="fairacct", description="HTCondor/glideinWMS accounting probe.")
    parser.add_argument("--version", action="version", version=f"fairacct {_package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text in COMMANDS.items():
        cmd = sub.add_parser(name, help=text)
        if name == command:
            _add_arguments(name, cmd)
    return parser.parse_args(argv)


def _package_version() -> str:
    try:
        return version("fairacct")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def _options(cmd: argparse.ArgumentParser, *overrides: str) -> argparse.ArgumentParser:
    """Add the options every command has, and of the settings' overrides those in
    ``overrides``: an option a command does not use is refused by the command line, not ignored."""
    from probes.config import OVERRIDES  # pydantic and the accounting: only for the command run

    cmd.add_argument("--config", metavar="FILE", help="TOML configuration file (see config/example.toml)")
    for o in OVERRIDES:
        if o.option not in overrides:
            continue
        if o.many:
            cmd.add_argument(o.option, metavar=o.metavar, action="append", default=[], help=o.help)
        else:
            cmd.add_argument(o.option, metavar=o.metavar, help=o.help)
    cmd.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    cmd.add_argument("--strict", action="store_true", default=None, help="stop at the first malformed ad")
    if any(o in _SOURCES for o in overrides) and "--store" not in overrides:  # reads, and writes nothing
        cmd.add_argument("--quarantine", metavar="DIR", help="keep the malformed ads read in DIR (default: not kept)")
    return cmd


def _actions(cmd: argparse.ArgumentParser) -> Callable[..., argparse.ArgumentParser]:
    """``add_parser`` of a command's own subcommands (``probe once``, ``config check``...)."""
    return cmd.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser  # type: ignore[no-any-return]


def _add_arguments(name: str, cmd: argparse.ArgumentParser) -> None:
    """The options (and subcommands) of the command ``name``, on its parser ``cmd``."""
    if name in _READERS:
        _options(cmd, *_READERS[name])
        if name == "overhead":
            cmd.add_argument(
                "--exact",
                action="store_true",
                help="also evaluate idle jobs' Requirements against the slots (classad2)",
            )
        elif name != "bill":
            cmd.add_argument(
                "--limit", type=_rows, metavar="N",
                help=f"show at most N rows of each table (default {TABLE_ROWS}, then a line says how many more; "
                "0: all); --json prints every row unless --limit is given",
            )  # fmt: skip
    elif name in ("penalty", "fairshare", "efficiency"):
        _options(
            cmd, *("--history", "--status-file", "--store") if name == "efficiency" else ("--history", "--status-file")
        )
        cmd.add_argument(
            "--swf", metavar="FILE", help="SWF workload log (or MetaCentrum's 21-field variant) instead of --history"
        )
        cmd.add_argument("--machines", metavar="FILE", help="Alea machines file instead of --status-file")
        cmd.add_argument(
            "--ram-unit",
            choices=("auto", "KB", "MB", "GB"),
            help="unit of RAM in the machines file (default: machines.ram_unit)",
        )
        if name == "fairshare":
            cmd.add_argument(
                "--at",
                metavar="TIME",
                help="when to evaluate: UNIX seconds or ISO-8601 (default: the end of the last job)",
            )
            cmd.add_argument("--fs-dir", metavar="DIR", help="also write Maui's FS.<epoch> window files into DIR")
        if name == "efficiency":
            _analytics_options(cmd)
    elif name == "fairness":
        _options(cmd, "--status-file", "--idle-file", "--store")
        cmd.add_argument("--bucket", type=float, metavar="SECONDS", help="time bucket (default: fairness.bucket_s)")
        cmd.add_argument(
            "--fraction",
            type=float,
            help="starved at or below this fraction of an equal share (default: fairness.fraction)",
        )
        cmd.add_argument("--store-records", action="store_true", help="also commit the fairness records to the store")
    elif name == "lab":
        from probes.accounting.lab import CASES

        _options(cmd)
        cmd.add_argument("--case", choices=list(CASES), help="one case (default: all)")
        cmd.add_argument(
            "--fraction",
            type=float,
            default=0.1,
            help="starved at or below this fraction of an equal share (default 0.1)",
        )
    elif name == "probe":
        action = _actions(cmd)
        _options(action("once", help="run one cycle into the store and print what it found"), *_ALL)
        run = _options(action("run", help="run the probe service (APScheduler) until SIGTERM or SIGINT"), *_ALL)
        run.add_argument(
            "--for", dest="duration", type=float, metavar="SECONDS", help="stop after SECONDS (a demo, a test)"
        )
    elif name in ("records", "outbox"):
        from collector.records import KINDS

        _options(cmd, "--store")
        if name == "records":
            cmd.add_argument("kind", choices=list(KINDS), help="record kind")
            cmd.add_argument("--since", metavar="TIME", help="records at or after TIME (ISO-8601 UTC or UNIX seconds)")
            cmd.add_argument("--until", metavar="TIME", help="records before TIME")
            cmd.add_argument("--limit", type=int, metavar="N", help="at most N records")
        else:
            cmd.add_argument(
                "action",
                nargs="?",
                choices=["retry"],
                help="retry: put the dead letters back in the outbox, to be sent again",
            )
            cmd.add_argument(
                "--dead-letters", action="store_true", help="list every dead letter with the store's reason"
            )
            cmd.add_argument("--kind", choices=list(KINDS), help="only the dead letters of this record kind")
    elif name == "mappings":
        _options(_actions(cmd)("install", help="install (or update) the index templates of every kind"), "--store")
    elif name == "collector":
        _options(
            _actions(cmd)(
                "serve", help="take records from probes over HTTP ([collector] section) until SIGTERM or SIGINT"
            ),
            "--store",
        )
    elif name == "config":
        _options(_actions(cmd)("check", help="validate the configuration and print it"), *_ALL)
    elif name in ("summarize", "export", "report", "dashboards"):
        from probes.cli.outputs import add_output_arguments

        add_output_arguments(name, cmd, lambda parser: _options(parser, "--store"))
    elif name == "priority":
        from probes.cli.priority import add_priority_arguments

        add_priority_arguments(cmd, lambda parser: _options(parser, "--store"))
    elif name == "slot-weight":
        from probes.cli.slot_weight import add_slot_weight_arguments

        add_slot_weight_arguments(cmd, lambda parser: _options(parser, "--history", "--status-file"))


def _rows(text: str) -> int:
    try:
        rows = int(text)
    except ValueError:
        rows = -1
    if rows < 0:
        raise argparse.ArgumentTypeError(f"expected a number of rows, 0 or more, got {text!r}")
    return rows


def _analytics_options(cmd: argparse.ArgumentParser) -> None:
    from probes.accounting.lab import WHATIF_POLICIES

    cmd.add_argument(
        "mode", nargs="?", choices=["whatif"], help="whatif: replay --swf on --machines under node-allocation policies"
    )
    cmd.add_argument(
        "--by", metavar="ATTR", help="resource set attribute: a slot column such as site, resource_name, speed"
    )
    cmd.add_argument(
        "--policy", action="append", choices=WHATIF_POLICIES, help="what-if policy (repeatable; default: all)"
    )
    cmd.add_argument(
        "--speed",
        action="append",
        default=[],
        metavar="CLASS=SPEED",
        help="what-if speed of a machine class (repeatable)",
    )
    cmd.add_argument("--since", metavar="TIME", help="without --status-file: stored records at or after TIME")
    cmd.add_argument("--until", metavar="TIME", help="without --status-file: stored records before TIME")
    cmd.add_argument(
        "--period", choices=("day", "month"), help="without --status-file: per day or month of the records (UTC)"
    )
