"""``fairacct priority sync|compare|restore``: the HTCondor priority sync from the command line.

The negotiator is reached through :class:`~probes.sources.bindings.Bindings` (a worker killed
at ``pool.timeout_s``), the fairshare state is the probe's ledger (the outbox checkpoint
``fairshare:ledger``), and the ``priority`` records of a sync or restore go to the outbox, sent
to the store by the next ``probe once`` or flush of ``probe run``. ``compare`` also reads the
store: each user's cpu-only, penalty and billed hours over the fairshare's windows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collector.errors import ConfigError, SinkError
from probes.cli.common import EXIT_OK, probe_name
from probes.cli.options import add_actions, add_options

if TYPE_CHECKING:
    import pandas as pd

    from probes.config import ProbeConfig

__all__ = ["HELP", "add_arguments", "run"]

HELP = "HTCondor priority sync: the fairshare state into the negotiator ([priority])"

_SHARES = ("submitter", "credential", "negotiator_share")  # and each metric's hours and share
_SHARES_TITLE = (
    "shares of the pool (%): the negotiator's usage (what its SLOT_WEIGHT charges) beside cpu-only, penalty and "
    "billed hours over the fairshare's windows"
)
_PLAN = ["submitter", "credential", "mode", "effective", "target", "before", "wanted", "after", "status"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``priority``'s actions and their options on its ``parser``."""
    add = add_actions(parser)
    sync = add_options(
        add("sync", help="bring the negotiator's effective priorities to the fairshare's (by factor or real priority)"),
        "--store",
    )
    restore = add_options(add("restore", help="put back what a sync changed"), "--store")
    restore.add_argument(
        "--from",
        dest="records",
        required=True,
        metavar="RECORD",
        help="JSON file of the sync's priority records (`priority sync --json`, `records priority --json`)",
    )
    for action in (sync, restore):
        action.add_argument(
            "--dry-run", action="store_true", help="print the equivalent condor_userprio commands, change nothing"
        )
    compare = add(
        "compare",
        help="the negotiator's priorities and share of usage beside fairacct's cpu-only, penalty and billed shares "
        "per submitter",
    )
    add_options(compare, "--store")


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


def _stored_usage(config: ProbeConfig, now: float) -> pd.DataFrame | None:
    """Usage per user over the fairshare's windows from the store; None (and a note on stderr)
    when the store cannot be read: the negotiator's side is still worth showing."""
    from collector.sinks import open_store
    from probes.pipeline import priority

    since, until = priority.fairshare_horizon(config, now=now)
    try:
        sink = open_store(config.store, config.opening(create=False))
        try:
            return priority.stored_usage(sink, since=since, until=until)
        finally:
            sink.close()
    except SinkError as exc:
        print(f"fairacct: no cpu-only, penalty or billed usage to compare: {exc}", file=sys.stderr)
        return None


def run(args: argparse.Namespace, config: ProbeConfig) -> int:
    from collector.records import encode_docs
    from probes.accounting.priority import USAGE_METRICS
    from probes.cli import views
    from probes.pipeline import priority
    from probes.pipeline.lane import RecordLane
    from probes.sources.bindings import Bindings

    lane = RecordLane(config)
    now, probe = time.time(), probe_name()
    with lane.open() as outbox:
        ledger = priority.windowed_ledger(outbox.checkpoint, config, now=now)
    bindings = Bindings(config.pool.condor_config, config.pool.timeout_s, config.pool.token_file)
    try:
        client = bindings.negotiator()
        if args.action == "compare":
            frame = priority.compare(config, client, ledger, now=now, usage=_stored_usage(config, now))
            if args.json:
                print(json.dumps(views.records(frame), indent=1))
                return EXIT_OK
            shown = (*_SHARES, *(f"{m}_{x}" for m in USAGE_METRICS for x in ("h", "share")))
            shares = [c for c in frame.columns if c in shown]
            negotiator = views.table(frame, [c for c in frame.columns if c not in shares[2:]])
            print(views.render([
                ("the negotiator beside the fairshare", negotiator),
                (_SHARES_TITLE, views.table(frame, shares, digits=2)),
            ]), end="")  # fmt: skip
            return EXIT_OK
        if args.action == "sync":
            result = priority.sync(config, client, ledger, now=now, dry_run=args.dry_run, probe=probe)
        else:
            records = _read_records(args.records)
            result = priority.restore(config, client, records, now=now, dry_run=args.dry_run, probe=probe)
    finally:
        bindings.close()
    if not args.dry_run:  # through the probe's lane: its commit lock and fault points, as every commit
        lane.store_records({"priority": encode_docs("priority", result.docs)} if result.docs else {})
    if args.json:
        print(json.dumps({"commands": result.commands, "applied": result.applied, "records": result.docs}, indent=1))
        return EXIT_OK
    print(
        "\n".join(result.commands)
        if args.dry_run
        else views.render([("priority " + args.action, views.table(result.plan, _PLAN))])
    )
    for line in priority.plan_notes(result.plan):
        print(f"fairacct: {line}")
    return EXIT_OK
