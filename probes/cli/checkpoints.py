"""``fairacct probe checkpoints``: where the probe has read each history up to, and setting it back.

Each schedd's (and each history file's) checkpoint is in the outbox
(:mod:`probes.sources.checkpoints`). An operator lists them; ``--reset NAME`` forgets one (the
next pass reads that history whole); ``--reset NAME --since DATE`` backfills: the next pass
reads the jobs that ended at or after DATE, by the rule of a checkpoint that holds only an end
time (the schedd's scan stops ``pool.history_lookback_s`` before it), and leaves a position
behind as every pass does. Records have deterministic ids, so the jobs read again are stored
once. Changing a checkpoint takes the state directory's lock: not while the probe runs.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from collector.errors import ConfigError
from collector.outbox import Outbox
from collector.statelock import hold_state_dir
from probes.cli.times import parse_time
from probes.config import ProbeConfig
from probes.files import check_writable
from probes.sources.checkpoints import HISTORY_PREFIX as _HISTORY
from probes.sources.checkpoints import checkpoint_key, history_key, history_name

__all__ = ["add_checkpoints_arguments", "run_checkpoints"]


def add_checkpoints_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--reset",
        metavar="NAME",
        help="a schedd's name (as listed) or a history file's path: forget its checkpoint (with --since: set it)",
    )
    cmd.add_argument(
        "--since",
        metavar="DATE",
        help="with --reset: the next pass reads the jobs that ended at or after DATE (ISO-8601 UTC or UNIX seconds)",
    )


def run_checkpoints(args: argparse.Namespace, config: ProbeConfig) -> tuple[dict[str, Any], str]:
    """List the history checkpoints, or reset one; the JSON document and the text to print."""
    if args.since and not args.reset:
        raise ConfigError("--since needs --reset NAME: the schedd (or history file) to backfill")
    state = config.probe.state_dir
    outbox_path = state / "outbox.sqlite"
    if not outbox_path.is_file():
        raise ConfigError(f"probe.state_dir: no outbox in {state}: this probe has read nothing yet")
    if not args.reset:
        with Outbox(outbox_path) as outbox:
            listed = outbox.checkpoints(_HISTORY)
        rows = [_row(source, value, at) for source, (value, at) in listed.items()]
        text = "\n".join(f"{r['name']}: {r['describe']}" for r in rows) or f"no history checkpoints in {outbox_path}"
        return {"checkpoints": rows}, text
    since = parse_time(args.since, "--since") if args.since else None
    check_writable(state, "probe.state_dir")
    with hold_state_dir(state, "probe.state_dir"), Outbox(outbox_path) as outbox:
        listed = outbox.checkpoints(_HISTORY)
        source = next(
            (s for s in (checkpoint_key(args.reset), history_key(args.reset), args.reset) if s in listed), None
        )
        if source is None and since is None:
            names = ", ".join(_row(s, v, a)["name"] for s, (v, a) in listed.items()) or "none"
            raise ConfigError(f"--reset: no history checkpoint named {args.reset!r} (there are: {names})")
        if source is None:  # a backfill of a history not read yet: its name as the probe will look it up
            source = history_key(args.reset) if "/" in args.reset else checkpoint_key(args.reset)
        if since is None:
            outbox.forget_checkpoint(source)
            text = f"{_name(source)}: checkpoint forgotten; the next pass reads its whole history"
        else:
            outbox.commit({}, {source: {"end": since, "ids": []}})
            text = f"{_name(source)}: the next pass reads the jobs that ended at or after {_iso(since)}"
    return {"reset": _name(source), "since": since}, text


def _name(source: str) -> str:
    return history_name(source)


def _row(source: str, value: Any, at: float) -> dict[str, Any]:
    end = float(value.get("end", -1.0)) if isinstance(value, dict) else -1.0
    tail = value.get("tail", []) if isinstance(value, dict) else []
    describe = (
        (f"jobs read up to {_iso(end)}" if end >= 0 else "no job read yet")
        + (f", position at job {tail[0]}" if tail else "")
        + f" (updated {_iso(at)})"
    )
    return {"name": _name(source), "source": source, "end": end, "tail": tail, "updated": _iso(at),
            "describe": describe, "value": json.loads(json.dumps(value))}  # fmt: skip


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
