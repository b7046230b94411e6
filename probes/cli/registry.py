"""Every ``fairacct`` command, declared once: the one list the command line is built from and
its commands are run through.

A command is one module of :mod:`probes.cli.commands` (a :class:`Command`): its ``HELP`` (what
``fairacct --help`` says of it), ``add_arguments(parser)`` (its options, and actions, on its
parser; called only for the command being run) and ``run(args, config) -> exit code`` (what it
does and prints). The modules import only light things at their top, and what is heavy (pandas,
the readers and their compiled scanner, the HTCondor bindings, the stores' clients, the services)
inside those two functions, so ``fairacct --version`` and ``--help``, which import this registry,
import nothing heavy, and a command's optional dependencies stay those of that command (the shape
of condor_adstash's interface registry).

Adding a command is one module and one line here. ``slots``, for example, is
``probes/cli/commands/slots.py``::

    HELP = "read startd ads into the slots and allocations tables"

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        limit_option(add_options(parser, "--status-file"))

    def run(args: argparse.Namespace, config: ProbeConfig) -> int:
        print_read(args, read(args, config, "status_files", option="--status-file"), slots=True)
        return EXIT_OK

(``ProbeConfig`` imported for the type checker only: it imports pydantic) and its line below,
``"slots": slots,`` (with ``slots`` in the import of the command modules). The option groups
commands share are in :mod:`probes.cli.options`, the helpers they share (printing, read problems,
exit codes) in :mod:`probes.cli.common`. No code looks at a command's name but the parser, which
builds the command line from here, and :func:`probes.cli.running.run`, which runs the command
from here (the registry's tests check both, and add a command of their own).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from probes.cli.commands import (
    apel,
    audit,
    bill,
    collector,
    config,
    dashboards,
    efficiency,
    export,
    fairness,
    fairshare,
    idle,
    jobs,
    lab,
    mappings,
    outbox,
    overhead,
    penalty,
    priority,
    probe,
    records,
    report,
    slot_weight,
    slots,
    summarize,
)

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["COMMANDS", "Command"]


class Command(Protocol):
    """What a command's module defines."""

    HELP: str
    """What ``fairacct --help`` says of the command."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's options (and actions) to its ``parser``."""

    def run(self, args: argparse.Namespace, config: ProbeConfig) -> int:
        """Run the command with the parsed command line and the configuration; the exit code."""


COMMANDS: Mapping[str, Command] = {
    "slots": slots,
    "idle": idle,
    "jobs": jobs,
    "overhead": overhead,
    "bill": bill,
    "penalty": penalty,
    "fairshare": fairshare,
    "efficiency": efficiency,
    "fairness": fairness,
    "lab": lab,
    "probe": probe,
    "records": records,
    "outbox": outbox,
    "mappings": mappings,
    "collector": collector,
    "config": config,
    "summarize": summarize,
    "export": export,
    "report": report,
    "dashboards": dashboards,
    "priority": priority,
    "audit": audit,
    "apel": apel,
    "slot-weight": slot_weight,
}
"""Every command by name, in the order ``fairacct --help`` lists them."""
