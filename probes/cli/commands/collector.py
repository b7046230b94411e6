"""``fairacct collector serve``: the collector service; the ``[collector]`` section, with its store
``[collector.store]``, is its settings."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, log_lines
from probes.cli.options import add_actions, add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "the collector service"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(
        add_actions(parser)(
            "serve", help="take records from probes over HTTP ([collector] section) until SIGTERM or SIGINT"
        ),
        "--store",
        "--log-level",
        "--log-format",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    """collector serve: the [collector] section, with its store [collector.store], is the server's settings."""
    from collector.server import serve  # Starlette and uvicorn only for the service
    from collector.statelock import hold_state_dir
    from probes.config import COLLECTOR_STORE_NOTE
    from probes.files import check_writable

    settings = config.collector_settings(store_url=args.store)
    if config.collector_store_from_probe:
        print(f"fairacct: note: {COLLECTOR_STORE_NOTE}", file=sys.stderr)
    check_writable(settings.state_dir, "collector.state_dir")
    with (
        hold_state_dir(settings.state_dir, "collector.state_dir"),  # before its outbox or store is opened
        log_lines(config.log.level, config.log.format, config.log.file),
    ):
        # the store is asked first: a refusal stops the start, an outage does not (collector.server.serve)
        serve(settings)
    return EXIT_OK
