"""The ``fairacct`` command line's grammar, built from the registry (:mod:`probes.cli.registry`).

It is read before anything heavy is imported. Every command of the registry is listed
(``fairacct --help``), but only the one being run gets its options (its module's
``add_arguments``): they name the settings' overrides, record kinds, lab cases and what-if
policies, whose modules import pandas, and ``fairacct --version`` or ``--help`` should not pay a
second for them. The option groups commands share are in :mod:`probes.cli.options`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from collector.release import release
from probes.cli import registry

__all__ = ["build", "parse"]


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line ``argv`` (default: the process's arguments) as a namespace; argparse
    prints the help, the version or the usage error and exits (2) where it must."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # the top-level parser has no option taking a value, so the first word is the command
    return build(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)


def build(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command of the registry, with the options of ``command`` only."""
    parser = argparse.ArgumentParser(prog="fairacct", description="HTCondor/glideinWMS accounting probe.")
    parser.add_argument("--version", action="version", version=f"fairacct {release()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, declared in registry.COMMANDS.items():
        cmd = sub.add_parser(name, help=declared.HELP)
        if name == command:
            declared.add_arguments(cmd)
    return parser
