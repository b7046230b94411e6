"""The HTCondor priority sync: the fairshare ledger's state, the negotiator's, the plan, the
records (before and after), and a restore of what a sync changed."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.errors import FairacctError
from collector.records import iso_utc
from collector.sinks.base import Aggregation, Sink, Total
from probes.accounting._tables import cell_float
from probes.accounting.fairshare import CREDENTIALS
from probes.accounting.ledger import LEDGER_COLUMNS, ledger_fairshare, ledger_rows
from probes.accounting.priority import (
    PLAN_COLUMNS,
    SET_COLUMN,
    USAGE_METRICS,
    compare_usage,
    credential_submitters,
    plan_priorities,
    userprio_commands,
)
from probes.config import ProbeConfig
from probes.pipeline.records import priority_docs
from probes.sources.checkpoints import LEDGER_KEY, fairshare_windows
from probes.sources.negotiator import NegotiatorLike, apply_plan, read_negotiator

__all__ = [
    "SyncResult",
    "compare",
    "fairshare_horizon",
    "fairshare_state",
    "plan_notes",
    "restore",
    "restore_plan",
    "stored_usage",
    "sync",
    "windowed_ledger",
]

_HOUR = 1.0 / 3600.0
# the store's records -> hours per user under each of USAGE_METRICS
_USAGE_TOTALS = {
    "job": (Total("cpu_only_h", ("cpus", "walltime_s"), _HOUR), Total("penalty_h", ("penalty_usage",), _HOUR)),
    "allocation": (Total("billed_h", ("billed_cpus_hours",)),),
}


@dataclass
class SyncResult:
    """A sync's (or restore's) plan, the ``condor_userprio`` commands equivalent to it, the
    submitters it set and its ``priority`` records."""

    plan: pd.DataFrame
    commands: list[str]
    applied: list[str]
    docs: list[dict[str, Any]]


def fairshare_state(config: ProbeConfig, ledger: Sequence[Sequence[Any]], *, now: float) -> pd.DataFrame:
    """Each credential's fairshare state up to ``now`` (the window holding it included)."""
    width = config.fairshare.interval_s
    return ledger_fairshare(ledger, math.floor(now / width) * width, config.fairshare_policy()).credentials


def _plan(config: ProbeConfig, negotiator: pd.DataFrame, ledger: Sequence[Sequence[Any]], *, now: float
          ) -> pd.DataFrame:  # fmt: skip
    """The sync's plan; a SourceError when the ledger holds no usage in the fairshare's windows
    (a probe that has counted nothing yet, or windows just changed): planning from zeros would
    bring every submitter to the same priority."""
    policy = config.priority_policy()
    creds = fairshare_state(config, ledger, now=now)
    if not (creds.loc[creds["type"] == policy.credential, "decayed"] > 0).any():
        since, _ = fairshare_horizon(config, now=now)
        raise FairacctError(
            f"the fairshare ledger holds no {policy.credential} usage since {iso_utc([since])[0]} "
            "(has `probe once` or `probe run` counted any completed job in these windows?): nothing to sync from"
        )
    frame = pd.DataFrame(ledger_rows(ledger), columns=list(LEDGER_COLUMNS))
    submitters = credential_submitters(frame, CREDENTIALS[policy.credential])
    return plan_priorities(creds, negotiator, policy, submitters)


def _finish(client: NegotiatorLike, plan: pd.DataFrame, config: ProbeConfig, *, now: float, dry_run: bool,
            probe: str, restore: bool = False) -> SyncResult:  # fmt: skip
    applied = [] if dry_run else apply_plan(client, plan)
    docs = priority_docs(plan, applied, pool=config.pool.name, at=now, dry_run=dry_run, restore=restore, probe=probe)
    return SyncResult(plan, userprio_commands(plan), applied, docs)


def sync(config: ProbeConfig, client: NegotiatorLike, ledger: Sequence[Sequence[Any]], *, now: float,
         dry_run: bool = False, probe: str) -> SyncResult:  # fmt: skip
    """Read the negotiator, plan from the fairshare state and (unless ``dry_run``) set it."""
    plan = _plan(config, read_negotiator(client), ledger, now=now)
    return _finish(client, plan, config, now=now, dry_run=dry_run, probe=probe)


def restore_plan(records: Sequence[Mapping[str, Any]], current: pd.DataFrame) -> pd.DataFrame:
    """The plan that puts back the ``before`` values of the records of a sync that set them
    (``applied``), against the negotiator's ``current`` state."""
    now = current.set_index("submitter")
    rows = []
    for r in records:
        if r.get("kind", "priority") != "priority" or not r.get("applied"):
            continue
        submitter, column = r["submitter"], SET_COLUMN[r["mode"]]
        row = {c: r.get(c) for c in PLAN_COLUMNS} | {"wanted": r["before"], "after": r["before"]}
        if submitter not in now.index:
            rows.append(row | {"before": None, "status": "unknown"})
            continue
        before = cell_float(now, submitter, column)
        rows.append(row | {"before": before, "status": "unchanged" if before == r["before"] else "set"})
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def restore(config: ProbeConfig, client: NegotiatorLike, records: Sequence[Mapping[str, Any]], *, now: float,
            dry_run: bool = False, probe: str) -> SyncResult:  # fmt: skip
    """Put back what the sync of ``records`` changed."""
    plan = restore_plan(records, read_negotiator(client))
    return _finish(client, plan, config, now=now, dry_run=dry_run, probe=probe, restore=True)


def fairshare_horizon(config: ProbeConfig, *, now: float) -> tuple[float, float]:
    """The time the fairshare state at ``now`` covers (UNIX seconds): its ``depth`` windows."""
    width = config.fairshare.interval_s
    return math.floor(now / width) * width - (config.fairshare.depth - 1) * width, now


def stored_usage(sink: Sink, *, since: float, until: float) -> pd.DataFrame:
    """Per submitter (``name``, as the negotiator names it), the hours of each of
    :data:`~probes.accounting.priority.USAGE_METRICS` in the store's records dated in
    ``[since, until)`` (UNIX seconds), summed in the store: core-hours and penalty PE-hours of
    the completed jobs (the penalty where the probe priced them), billed core-hours of the
    running jobs' snapshots. Records are dated to the second: those of ``until``'s own second
    count (a job that ended in the second the command runs is in the ledger already)."""
    start, end = iso_utc([since, math.floor(until) + 1.0])
    frames = []
    for kind, totals in _USAGE_TOTALS.items():
        rows = sink.aggregate(Aggregation(kind, ("submitter",), totals, period=None, since=start, until=end))
        frame = pd.DataFrame(rows, columns=["submitter", *(t.name for t in totals)])
        frames.append(frame[frame["submitter"].notna()].set_index("submitter"))
    joined = pd.concat(frames, axis=1).fillna(0.0)
    out = joined.reindex(columns=[f"{m}_h" for m in USAGE_METRICS], fill_value=0.0).astype(float)
    return out.rename_axis("name").reset_index().sort_values("name", kind="stable").reset_index(drop=True)


def compare(config: ProbeConfig, client: NegotiatorLike, ledger: Sequence[Sequence[Any]], *, now: float,
            usage: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """The negotiator's view of each submitter beside fairacct's fairshare state of its
    credential and, with ``usage`` (:func:`stored_usage`), the shares of the pool each gets
    under the negotiator's usage and under cpu-only, penalty and billed usage."""
    neg = read_negotiator(client)
    creds = fairshare_state(config, ledger, now=now)
    frame = pd.DataFrame(ledger_rows(ledger), columns=list(LEDGER_COLUMNS))
    submitters = credential_submitters(frame, CREDENTIALS[config.priority.credential])
    plan = plan_priorities(creds, neg, config.priority_policy(), submitters)
    decayed = creds[creds["type"] == config.priority.credential].set_index("name")["decayed"]
    fair = plan.loc[plan["submitter"].notna(), ["submitter", "credential", "effective", "target", "wanted"]]
    fair.insert(2, f"{config.fairshare.metric}_s", fair["credential"].map(decayed))
    frame = neg.merge(fair, on="submitter", how="outer").rename(columns={"wanted": f"fairacct_{config.priority.mode}"})
    shares = compare_usage(neg, usage if usage is not None else pd.DataFrame({"name": []}).assign(
        **{f"{m}_h": [] for m in USAGE_METRICS}))  # fmt: skip
    known = shares[shares["submitter"].notna()].drop(columns="credential")
    frame = frame.merge(known, on="submitter", how="left")
    unknown = shares[shares["submitter"].isna()]
    if len(unknown):  # fairacct saw their usage; the negotiator does not know them
        frame = pd.concat([frame, unknown.reindex(columns=frame.columns)], ignore_index=True)
    if usage is None:  # no stored usage: unknown, not 0
        frame[[c for c in shares.columns if c.endswith(("_h", "_share")) and c != "negotiator_share"]] = float("nan")
    frame["submitter"] = frame["submitter"].astype(object).where(frame["submitter"].notna(), None)
    return frame


def plan_notes(plan: pd.DataFrame) -> list[str]:
    """What an operator must know of a plan beyond its rows."""
    notes = []
    unknown = plan.loc[plan["status"] == "unknown", "credential"].tolist()
    if unknown:
        notes.append(f"no submitter of these is known to the negotiator, skipped: {', '.join(unknown)}")
    named = plan[plan["submitter"].notna() & plan["credential"].notna()].groupby("credential", sort=True)["submitter"]
    for credential, names in named:
        if len(names) > 1:
            notes.append(
                f"{credential} submits as {len(names)} submitters ({', '.join(names)}): each is brought to "
                f"{credential}'s effective priority"
            )
    alone = plan.loc[plan["status"] == "no credential", "submitter"].tolist()
    if alone:
        notes.append(f"the negotiator lists submitters with no fairshare usage, left alone: {', '.join(alone)}")
    return notes


def windowed_ledger(checkpoint: Callable[[str], Any], config: ProbeConfig, *, now: float) -> list[list[Any]]:
    """The outbox's fairshare ledger in the windows of ``fairshare.interval_s``, as the next
    probe cycle will store it (re-windowed if the width changed since it was counted)."""
    rows = fairshare_windows(checkpoint, config.fairshare.interval_s, now=now).get(LEDGER_KEY)
    return (checkpoint(LEDGER_KEY) or []) if rows is None else rows
