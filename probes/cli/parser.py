"""The ``fairacct`` command line's grammar: its commands' options and their help.

It is read before anything heavy is imported. Every command of the registry
(:mod:`probes.cli.registry`) is listed (``fairacct --help``), but only the one being run gets
its options: they name the settings' overrides, record kinds, lab cases and what-if policies,
whose modules import pandas, and ``fairacct --version`` or ``--help`` should not pay a second
for them. The options of the commands :mod:`probes.cli.commands` runs are added here; those of
the other commands' modules with :func:`add_options` and :func:`add_actions`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from probes.cli.registry import COMMANDS

__all__ = [
    "TABLE_ROWS",
    "add_actions",
    "add_options",
    "bill_arguments",
    "build",
    "collector_arguments",
    "config_arguments",
    "efficiency_arguments",
    "fairness_arguments",
    "fairshare_arguments",
    "idle_arguments",
    "jobs_arguments",
    "lab_arguments",
    "mappings_arguments",
    "outbox_arguments",
    "overhead_arguments",
    "parse",
    "penalty_arguments",
    "probe_arguments",
    "records_arguments",
    "slots_arguments",
    "workload_options",
]

_SOURCES = ("--status-file", "--idle-file", "--history")
_ALL = (*_SOURCES, "--store")

TABLE_ROWS = 50
"""Rows of a table ``slots``, ``idle`` and ``jobs`` show unless ``--limit`` says otherwise: a
screenful, not a 40,000-row history (which ``--json`` or ``--limit 0`` print whole)."""


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line ``argv`` (default: the process's arguments) as a namespace; argparse
    prints the help, the version or the usage error and exits (2) where it must."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # the top-level parser has no option taking a value, so the first word is the command
    return build(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)


def build(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command of the registry, with the options of ``command`` only."""
    parser = argparse.ArgumentParser(prog="fairacct", description="HTCondor/glideinWMS accounting probe.")
    parser.add_argument("--version", action="version", version=f"fairacct {_package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, declared in COMMANDS.items():
        cmd = sub.add_parser(name, help=declared.help)
        if name == command:
            declared.add_arguments(cmd)
    return parser


def _package_version() -> str:
    try:
        return version("fairacct")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def add_options(cmd: argparse.ArgumentParser, *overrides: str) -> argparse.ArgumentParser:
    """Add the options every command has, and of the settings' overrides those in
    ``overrides``: an option a command does not use is refused by the command line, not ignored."""
    from probes.config import OVERRIDES  # pydantic and the accounting: only for the command run

    cmd.add_argument(
        "--config",
        metavar="FILE",
        help="TOML configuration file (`fairacct config example` prints one, every key documented)",
    )
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


def add_actions(cmd: argparse.ArgumentParser) -> Callable[..., argparse.ArgumentParser]:
    """``add_parser`` of a command's own subcommands (``probe once``, ``config check``...)."""
    return cmd.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser


# -- the commands that read sources and print what they read ------------------------------------


def slots_arguments(cmd: argparse.ArgumentParser) -> None:
    _limit(add_options(cmd, "--status-file"))


def idle_arguments(cmd: argparse.ArgumentParser) -> None:
    _limit(add_options(cmd, "--idle-file", "--status-file"))


def jobs_arguments(cmd: argparse.ArgumentParser) -> None:
    _limit(add_options(cmd, "--history"))


def overhead_arguments(cmd: argparse.ArgumentParser) -> None:
    add_options(cmd, "--status-file", "--idle-file")
    cmd.add_argument(
        "--exact",
        action="store_true",
        help="also evaluate idle jobs' Requirements against the slots (classad2)",
    )


def bill_arguments(cmd: argparse.ArgumentParser) -> None:
    add_options(cmd, "--status-file")


def _limit(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--limit", type=_rows, metavar="N",
        help=f"show at most N rows of each table (default {TABLE_ROWS}, then a line says how many more; "
        "0: all); --json prints every row unless --limit is given",
    )  # fmt: skip


# -- fair usage and analytics ---------------------------------------------------------------------


def penalty_arguments(cmd: argparse.ArgumentParser) -> None:
    workload_options(cmd, "--history", "--status-file")


def fairshare_arguments(cmd: argparse.ArgumentParser) -> None:
    workload_options(cmd, "--history", "--status-file")
    cmd.add_argument(
        "--at",
        metavar="TIME",
        help="when to evaluate: UNIX seconds or ISO-8601 (default: the end of the last job)",
    )
    cmd.add_argument("--fs-dir", metavar="DIR", help="also write Maui's FS.<epoch> window files into DIR")


def efficiency_arguments(cmd: argparse.ArgumentParser) -> None:
    from probes.accounting.lab import WHATIF_POLICIES

    workload_options(cmd, "--history", "--status-file", "--store")
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


def workload_options(cmd: argparse.ArgumentParser, *overrides: str) -> None:
    """The options of the commands that read a workload: a history or an SWF log, on machines
    from a status dump or an Alea machines file."""
    add_options(cmd, *overrides)
    cmd.add_argument(
        "--swf", metavar="FILE", help="SWF workload log (or MetaCentrum's 21-field variant) instead of --history"
    )
    cmd.add_argument("--machines", metavar="FILE", help="Alea machines file instead of --status-file")
    cmd.add_argument(
        "--ram-unit",
        choices=("auto", "KB", "MB", "GB"),
        help="unit of RAM in the machines file (default: machines.ram_unit)",
    )


def fairness_arguments(cmd: argparse.ArgumentParser) -> None:
    add_options(cmd, "--status-file", "--idle-file", "--store")
    cmd.add_argument("--bucket", type=float, metavar="SECONDS", help="time bucket (default: fairness.bucket_s)")
    cmd.add_argument(
        "--fraction",
        type=float,
        help="starved at or below this fraction of an equal share (default: fairness.fraction)",
    )
    cmd.add_argument("--store-records", action="store_true", help="also commit the fairness records to the store")


def lab_arguments(cmd: argparse.ArgumentParser) -> None:
    from probes.accounting.lab import CASES

    add_options(cmd)
    cmd.add_argument("--case", choices=list(CASES), help="one case (default: all)")
    cmd.add_argument(
        "--fraction",
        type=float,
        default=0.1,
        help="starved at or below this fraction of an equal share (default 0.1)",
    )


# -- the probe, the store and the outbox, the collector, the configuration -----------------------


def probe_arguments(cmd: argparse.ArgumentParser) -> None:
    action = add_actions(cmd)
    add_options(action("once", help="run one cycle into the store and print what it found"), *_ALL)
    run = add_options(action("run", help="run the probe service (APScheduler) until SIGTERM or SIGINT"), *_ALL)
    run.add_argument(
        "--for", dest="duration", type=float, metavar="SECONDS", help="stop after SECONDS (a demo, a test)"
    )
    from probes.cli.checkpoints import add_checkpoints_arguments

    add_checkpoints_arguments(
        add_options(action("checkpoints", help="where each schedd's history was read up to; reset or backfill one"))
    )


def records_arguments(cmd: argparse.ArgumentParser) -> None:
    from collector.records import KINDS

    add_options(cmd, "--store")
    cmd.add_argument("kind", choices=list(KINDS), help="record kind")
    cmd.add_argument("--since", metavar="TIME", help="records at or after TIME (ISO-8601 UTC or UNIX seconds)")
    cmd.add_argument("--until", metavar="TIME", help="records before TIME")
    cmd.add_argument("--limit", type=int, metavar="N", help="at most N records")


def outbox_arguments(cmd: argparse.ArgumentParser) -> None:
    from collector.records import KINDS

    add_options(cmd, "--store")
    cmd.add_argument(
        "action",
        nargs="?",
        choices=["retry"],
        help="retry: put the dead letters back in the outbox, to be sent again",
    )
    cmd.add_argument("--dead-letters", action="store_true", help="list every dead letter with the store's reason")
    cmd.add_argument("--kind", choices=list(KINDS), help="only the dead letters of this record kind")


def mappings_arguments(cmd: argparse.ArgumentParser) -> None:
    add_options(add_actions(cmd)("install", help="install (or update) the index templates of every kind"), "--store")


def collector_arguments(cmd: argparse.ArgumentParser) -> None:
    add_options(
        add_actions(cmd)(
            "serve", help="take records from probes over HTTP ([collector] section) until SIGTERM or SIGINT"
        ),
        "--store",
    )


def config_arguments(cmd: argparse.ArgumentParser) -> None:
    from probes.examples import EXAMPLES

    action = add_actions(cmd)
    add_options(action("check", help="validate the configuration and print it"), *_ALL)
    example = add_options(
        action(
            "example",
            help="print the example configuration (every key documented) or a systemd unit, as the wheel ships them",
        )
    )
    example.add_argument(
        "name", nargs="?", choices=EXAMPLES, default=EXAMPLES[0], help="the file (default %(default)s)"
    )
    example.add_argument(
        "--write", metavar="DIR", help="write every one of them into DIR instead (an existing file is kept)"
    )


def _rows(text: str) -> int:
    try:
        rows = int(text)
    except ValueError:
        rows = -1
    if rows < 0:
        raise argparse.ArgumentTypeError(f"expected a number of rows, 0 or more, got {text!r}")
    return rows
