"""``fairacct outbox [retry]``: the outbox's depth, oldest item and dead letters; ``retry`` puts
the dead letters back, to be sent again."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from probes.cli.common import EXIT_OK, print_text
from probes.cli.options import add_options

if TYPE_CHECKING:
    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "depth, oldest item and dead letters of the outbox"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from collector.records import KINDS
    from probes.config.store import UPSTREAM_JOBS

    add_options(parser, "--store")
    parser.add_argument(
        "action",
        nargs="?",
        choices=["retry"],
        help="retry: put the dead letters back in the outbox, to be sent again",
    )
    parser.add_argument("--dead-letters", action="store_true", help="list every dead letter with the store's reason")
    parser.add_argument(
        "--kind", choices=[*KINDS, UPSTREAM_JOBS], help="only the dead letters of this record kind (or [upstream]'s)"
    )


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.outbox import Outbox
    from probes.cli import views

    doc: Any
    with Outbox(config.probe.state_dir / "outbox.sqlite") as outbox:
        if args.action == "retry":
            moved = outbox.retry_dead_letters(args.kind)
            doc = {"retried": moved}
            text = (
                f"put back in the outbox: {', '.join(f'{n} {k}' for k, n in moved.items())}; "
                "the next `probe once` or flush of `probe run` sends them"
                if moved
                else "no dead letters" + (f" of kind {args.kind}" if args.kind else "")
            )
        else:
            listed = outbox.dead_letters(None if args.dead_letters else 20, kind=args.kind)
            doc, text = views.outbox_view(outbox.status(), listed)
    print_text(args, doc, text)
    return EXIT_OK
