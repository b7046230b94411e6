"""``fairacct mappings install``: the Elasticsearch index templates of every record kind."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, open_store, store_of
from probes.cli.options import add_actions, add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "Elasticsearch index templates"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(add_actions(parser)("install", help="install (or update) the index templates of every kind"), "--store")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    # a collector's configuration: its store is under collector.state_dir
    with open_store(*store_of(args, config), create=True) as sink:
        installed = sink.install_templates()
    print(json.dumps({"installed": installed}) if args.json else f"installed templates: {', '.join(installed)}")
    return EXIT_OK
