"""``fairacct slots``: the startd ads of a status dump as the slots and allocations tables."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, print_read, read
from probes.cli.options import add_options, limit_option

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "read startd ads into the slots and allocations tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    limit_option(add_options(parser, "--status-file"))


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    print_read(args, read(args, config, "status_files", option="--status-file"), slots=True)
    return EXIT_OK
