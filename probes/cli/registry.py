"""Every ``fairacct`` command, declared once: the one list the command line is built from.

A :class:`Command` is the command's name, what ``fairacct --help`` says of it, and two functions
named as ``"module:function"`` within :mod:`probes.cli`: the one that adds its options (and
actions) to its parser, and the one that runs it (``run(args, config) -> exit code``). Neither
is imported before the command is read or run, so ``fairacct --version`` and ``--help`` import
nothing heavy, and a command's optional dependencies stay those of that command (the shape of
condor_adstash's interface registry).

A new command is one entry here, and its two functions where they belong.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["COMMANDS", "Command", "Runner"]

Runner = Callable[[argparse.Namespace, "ProbeConfig"], int]
"""A command's run function: the parsed command line and the configuration; the exit code."""


@dataclass(frozen=True)
class Command:
    """One command: ``name``, its ``help`` in ``fairacct --help``, and its ``arguments`` and
    ``run`` functions as ``"module:function"`` in :mod:`probes.cli`, imported when needed."""

    name: str
    help: str
    arguments: str
    run: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's options (and actions) to its ``parser``."""
        cast(Callable[[argparse.ArgumentParser], None], _load(self.arguments))(parser)

    def runner(self) -> Runner:
        """The function that runs the command."""
        return cast(Runner, _load(self.run))


def _load(reference: str) -> object:
    module, _, name = reference.partition(":")
    return getattr(import_module(f"probes.cli.{module}"), name)


COMMANDS: Mapping[str, Command] = {
    c.name: c
    for c in (
        Command(
            "slots",
            "read startd ads into the slots and allocations tables",
            "parser:slots_arguments",
            "commands:slots_command",
        ),
        Command(
            "idle",
            "read the queue into the idle table (autoclusters)",
            "parser:idle_arguments",
            "commands:idle_command",
        ),
        Command("jobs", "read job history into the jobs table", "parser:jobs_arguments", "commands:jobs_command"),
        Command(
            "overhead",
            "true overhead of each slot in canonical units, and its histogram",
            "parser:overhead_arguments",
            "commands:overhead_command",
        ),
        Command("bill", "proportional bills of the running jobs", "parser:bill_arguments", "commands:bill_command"),
        Command(
            "penalty",
            "multi-resource penalty of each job, beside the metrics it replaces (Klusacek & Rudova 2015)",
            "parser:penalty_arguments",
            "commands:usage_command",
        ),
        Command(
            "fairshare",
            "Maui-style fairshare by credential: diagnose -f, FS.<epoch> files, JSON (Maui Admin Guide, 6.3)",
            "parser:fairshare_arguments",
            "commands:usage_command",
        ),
        Command(
            "efficiency",
            "efficiency by resource set; `efficiency whatif`: node-allocation policies (Jackson et al. 2001)",
            "parser:efficiency_arguments",
            "commands:analytics_command",
        ),
        Command(
            "fairness",
            "demand vs allocation, Jain's index and starvation per user (Sedighi et al. 2014)",
            "parser:fairness_arguments",
            "commands:analytics_command",
        ),
        Command(
            "lab",
            "fair-share lab of Sedighi et al. 2014: Table 2.1, cases 1-5 under formula 2.1 and Maui fairshare",
            "parser:lab_arguments",
            "commands:analytics_command",
        ),
        Command("probe", "run the probe", "parser:probe_arguments", "commands:probe_command"),
        Command("records", "print stored records of one kind", "parser:records_arguments", "commands:store_command"),
        Command(
            "outbox",
            "depth, oldest item and dead letters of the outbox",
            "parser:outbox_arguments",
            "commands:store_command",
        ),
        Command("mappings", "Elasticsearch index templates", "parser:mappings_arguments", "commands:store_command"),
        Command("collector", "the collector service", "parser:collector_arguments", "commands:collector_command"),
        Command("config", "configuration", "parser:config_arguments", "commands:config_command"),
        Command(
            "summarize",
            "compute the daily summaries of a range of days in the store",
            "outputs:summarize_arguments",
            "commands:outputs_command",
        ),
        Command(
            "export",
            "usage per project, user, site and month for allocation committees",
            "outputs:export_arguments",
            "commands:outputs_command",
        ),
        Command(
            "report",
            "a static HTML report (plots and tables) of a range of days",
            "outputs:report_arguments",
            "commands:outputs_command",
        ),
        Command(
            "dashboards",
            "Kibana / OpenSearch Dashboards saved objects",
            "outputs:dashboards_arguments",
            "commands:outputs_command",
        ),
        Command(
            "priority",
            "HTCondor priority sync: the fairshare state into the negotiator ([priority])",
            "priority:add_priority_arguments",
            "priority:run_priority_command",
        ),
        Command(
            "audit",
            "the books balance: allocation records against completed jobs, node books, gaps, within the sampling bound",
            "audit:add_audit_arguments",
            "audit:run_audit_command",
        ),
        Command(
            "apel",
            "APEL messages (WLCG accounting) of whole months from the store, into ssmsend's outgoing queue",
            "apel:add_apel_arguments",
            "apel:run_apel_command",
        ),
        Command(
            "slot-weight",
            "the SLOT_WEIGHT (Cpus, Memory, Disk) that approximates the penalty, standard job or bills, with its error",
            "slot_weight:add_slot_weight_arguments",
            "slot_weight:run_slot_weight_command",
        ),
    )
}
"""Every command, in the order ``fairacct --help`` lists them."""
