"""The option groups commands share: those every command has (:func:`add_options`), a
command's own actions (:func:`add_actions`), a workload (:func:`workload_options`), the rows of
a table (:func:`limit_option`) and a range of days (:func:`period_options`).

Only a command being run gets its options (:mod:`probes.cli.parser`), so these may import what
the options name (the settings' overrides import pydantic and pandas) inside the function.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = [
    "ALL_SOURCES",
    "TABLE_ROWS",
    "add_actions",
    "add_options",
    "awards_option",
    "condor_option",
    "limit_option",
    "period_options",
    "workload_options",
]

_SOURCES = ("--status-file", "--idle-file", "--history")
ALL_SOURCES = (*_SOURCES, "--store")
"""The overrides of the commands that read every source into the store (``probe``, ``config check``)."""

TABLE_ROWS = 50
"""Rows of a table ``slots``, ``idle`` and ``jobs`` show unless ``--limit`` says otherwise: a
screenful, not a 40,000-row history (which ``--json`` or ``--limit 0`` print whole)."""


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
            cmd.add_argument(o.option, metavar=o.metavar, help=o.help, choices=o.choices or None)
    cmd.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    if any(o in _SOURCES for o in overrides):  # only a command that reads ads has a malformed one to stop at
        cmd.add_argument("--strict", action="store_true", default=None, help="stop at the first malformed ad")
        if "--store" not in overrides:  # reads, and writes nothing
            cmd.add_argument(
                "--quarantine", metavar="DIR", help="keep the malformed ads read in DIR (default: not kept)"
            )
    return cmd


def add_actions(cmd: argparse.ArgumentParser) -> Callable[..., argparse.ArgumentParser]:
    """``add_parser`` of a command's own subcommands (``probe once``, ``config check``...)."""
    return cmd.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser


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


def limit_option(cmd: argparse.ArgumentParser) -> None:
    """``--limit N``: the rows of each table ``slots``, ``idle`` and ``jobs`` show."""
    cmd.add_argument(
        "--limit", type=_rows, metavar="N",
        help=f"show at most N rows of each table (default {TABLE_ROWS}, then a line says how many more; "
        "0: all); --json prints every row unless --limit is given",
    )  # fmt: skip


def period_options(cmd: argparse.ArgumentParser) -> None:
    """``--from DATE --to DATE``: the UTC days of the commands on the store's summaries."""
    cmd.add_argument("--from", dest="first", required=True, metavar="DATE", help="first UTC day (YYYY-MM-DD)")
    cmd.add_argument("--to", dest="last", required=True, metavar="DATE", help="last UTC day, included")


def awards_option(cmd: argparse.ArgumentParser) -> None:
    """``--awards FILE``: the committee's awards (CSV or TOML), in place of ``[awards] file``."""
    cmd.add_argument(
        "--awards",
        metavar="FILE",
        help="the allocation committee's awards: a CSV (project,resource,amount,period) or a TOML file of [[award]] "
        "tables (default: [awards] file; none: usage alone)",
    )


def _rows(text: str) -> int:
    try:
        rows = int(text)
    except ValueError:
        rows = -1
    if rows < 0:
        raise argparse.ArgumentTypeError(f"expected a number of rows, 0 or more, got {text!r}")
    return rows


def condor_option(cmd: argparse.ArgumentParser) -> None:
    """``--condor``: the pool's own configuration beneath the file (:mod:`probes.config.condor`)."""
    cmd.add_argument(
        "--condor",
        action="store_true",
        help="as an HTCondor daemon: take the pool, its collectors, UPDATE_INTERVAL, CLASSAD_LIFETIME, the log "
        "($(LOG)/FairacctLog) and the state ($(SPOOL)/fairacct) from the pool's configuration (CONDOR_CONFIG), "
        "and fairacct's own file from FAIRACCT_CONFIG unless --config gives one; what the file sets wins",
    )
