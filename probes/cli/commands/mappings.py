"""``fairacct mappings install``: the Elasticsearch index templates of every record kind."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, opened_store, store_of
from probes.cli.options import add_actions, add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Elasticsearch index templates"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(
        add_actions(parser)(
            "install",
            help="install (or update) the index templates of every kind, and move the indices behind them to new ones",
        ),
        "--store",
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    # a collector's configuration: its store is under collector.state_dir
    from collector.sinks import upgrade_store

    with opened_store(*store_of(args, config), create=True) as sink:
        installed = sink.install_templates()
        migrated = upgrade_store(sink)  # the indices made from an older template: moved to a new one
    if args.json:
        print(json.dumps({"installed": installed, "migrated": migrated}))
        return EXIT_OK
    print(f"installed templates: {', '.join(installed)}")
    for line in migrated:
        print(f"migrated: {line}")
    return EXIT_OK
