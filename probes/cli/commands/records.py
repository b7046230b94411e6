"""``fairacct records KIND``: the stored records of one kind."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from probes.cli.common import EXIT_OK, opened_store, store_of, time_arg
from probes.cli.options import add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "print stored records of one kind"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from collector.records import KINDS

    add_options(parser, "--store")
    parser.add_argument("kind", choices=list(KINDS), help="record kind")
    parser.add_argument("--since", metavar="TIME", help="records at or after TIME (ISO-8601 UTC or UNIX seconds)")
    parser.add_argument("--until", metavar="TIME", help="records before TIME")
    parser.add_argument("--limit", type=int, metavar="N", help="at most N records")


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from probes.cli import views

    # a collector's configuration: its store is under collector.state_dir
    with opened_store(*store_of(args, config), create=False) as sink:
        docs = sink.query(
            args.kind, since=time_arg(args.since, "--since"), until=time_arg(args.until, "--until"), limit=args.limit
        )
    print(json.dumps(docs, indent=1) if args.json else views.docs_table(args.kind, docs))
    return EXIT_OK
