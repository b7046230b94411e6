"""``fairacct priority sync|compare|restore``: the HTCondor priority sync from the command line.

The negotiator is reached through :class:`~probes.sources.bindings.Bindings` (a worker killed
at ``pool.timeout_s``), the fairshare state is the probe's ledger (the outbox checkpoint
``fairshare:ledger``), and the ``priority`` records of a sync or restore go to the outbox, sent
to the store by the next ``probe once`` or flush of ``probe run``.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.errors import ConfigError
from collector.outbox import Outbox
from probes.cli import views
from probes.config import ProbeConfig
from probes.pipeline import priority
from probes.sources.bindings import Bindings
from probes.sources.checkpoints import LEDGER_KEY

__all__ = ["add_priority_arguments", "run_priority_command"]

_PLAN = ["submitter", "credential", "mode", "effective", "target", "before", "wanted", "after", "status"]


def add_priority_arguments(
    cmd: argparse.ArgumentParser, options: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]
) -> None:
    """``priority``'s actions and their options on its parser ``cmd``; ``options`` adds those
    every command has."""
    actions = cmd.add_subparsers(dest="action", required=True, metavar="ACTION")
    sync = options(actions.add_parser("sync", help="set the negotiator's factors or usage from the fairshare state"))
    restore = options(actions.add_parser("restore", help="put back what a sync changed"))
    restore.add_argument("--from", dest="records", required=True, metavar="RECORD",
                         help="JSON file of the sync's priority records (`priority sync --json`, `records priority --json`)")  # fmt: skip
    for action in (sync, restore):
        action.add_argument("--dry-run", action="store_true", help="print the equivalent condor_userprio commands, change nothing")
    options(actions.add_parser("compare", help="the negotiator's priorities beside fairacct's usage per submitter"))


def _read_records(path: str) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
        doc = json.loads(text) if text.lstrip().startswith(("[", "{")) else None
        if isinstance(doc, dict):
            doc = doc.get("records", doc.get("priority"))
        if doc is None:  # one record per line
            doc = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--from {path}: cannot read priority records ({exc})") from None
    if not isinstance(doc, list) or not all(isinstance(d, dict) and d.get("kind") == "priority" for d in doc):
        raise ConfigError(f"--from {path}: expected a list of priority records")
    return doc


def run_priority_command(args: argparse.Namespace, config: ProbeConfig) -> int:
    state = config.probe.state_dir / "outbox.sqlite"
    with Outbox(state) as outbox:
        ledger = outbox.checkpoint(LEDGER_KEY) or []
    bindings = Bindings(config.pool.condor_config, config.pool.timeout_s, config.pool.token_file)
    now, probe = time.time(), f"fairacct@{socket.gethostname()}"
    try:
        client = bindings.negotiator()
        if args.action == "compare":
            frame = priority.compare(config, client, ledger, now=now)
            print(json.dumps(views.records(frame), indent=1) if args.json else views.table(frame, list(frame.columns)))
            return 0
        if args.action == "sync":
            result = priority.sync(config, client, ledger, now=now, dry_run=args.dry_run, probe=probe)
        else:
            records = _read_records(args.records)
            result = priority.restore(config, client, records, now=now, dry_run=args.dry_run, probe=probe)
    finally:
        bindings.close()
    if not args.dry_run:
        with Outbox(state) as outbox:
            outbox.commit({"priority": result.docs} if result.docs else {}, {})
    if args.json:
        print(json.dumps({"commands": result.commands, "applied": result.applied, "records": result.docs}, indent=1))
        return 0
    print("\n".join(result.commands) if args.dry_run else views.render([("priority " + args.action, views.table(result.plan, _PLAN))]))
    skipped = result.plan[result.plan["status"] == "unknown"]["credential"].tolist()
    if skipped:
        print(f"fairacct: not known to the negotiator, skipped: {', '.join(skipped)}")
    return 0
