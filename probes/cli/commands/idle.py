"""``fairacct idle``: the queue's autoclusters as the idle table."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_read, read
from probes.cli.options import add_options, limit_option

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "read the queue into the idle table (autoclusters)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    limit_option(add_options(parser, "--idle-file", "--status-file"))


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    # idle demand from a condor_q -autocluster dump needs the running jobs of a status dump
    print_read(args, read(args, config, "idle_files", "status_files", option="--idle-file"), slots=False)
    return EXIT_OK
