"""The HTCondor priority sync: the fairshare ledger's state, the negotiator's, the plan, the
records (before and after), and a restore of what a sync changed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.records import iso_utc
from collector.sinks.base import Aggregation, Sink, Total
from probes.accounting._tables import cell_float
from probes.accounting.ledger import ledger_fairshare
from probes.accounting.priority import PLAN_COLUMNS, USAGE_METRICS, compare_usage, plan_priorities, userprio_commands
from probes.config import ProbeConfig
from probes.pipeline.records import priority_docs
from probes.sources.negotiator import NegotiatorLike, apply_plan, read_negotiator

__all__ = [
    "SyncResult",
    "compare",
    "fairshare_horizon",
    "fairshare_state",
    "restore",
    "restore_plan",
    "stored_usage",
    "sync",
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


def _finish(client: NegotiatorLike, plan: pd.DataFrame, config: ProbeConfig, *, now: float, dry_run: bool,
            probe: str, restore: bool = False) -> SyncResult:  # fmt: skip
    applied = [] if dry_run else apply_plan(client, plan)
    docs = priority_docs(plan, applied, pool=config.pool.name, at=now, dry_run=dry_run, restore=restore, probe=probe)
    return SyncResult(plan, userprio_commands(plan), applied, docs)


def sync(config: ProbeConfig, client: NegotiatorLike, ledger: Sequence[Sequence[Any]], *, now: float,
         dry_run: bool = False, probe: str) -> SyncResult:  # fmt: skip
    """Read the negotiator, plan from the fairshare state and (unless ``dry_run``) set it."""
    plan = plan_priorities(fairshare_state(config, ledger, now=now), read_negotiator(client), config.priority_policy())
    return _finish(client, plan, config, now=now, dry_run=dry_run, probe=probe)


def restore_plan(records: Sequence[Mapping[str, Any]], current: pd.DataFrame) -> pd.DataFrame:
    """The plan that puts back the ``before`` values of the records of a sync that set them
    (``applied``), against the negotiator's ``current`` state."""
    now = current.set_index("submitter")
    rows = []
    for r in records:
        if r.get("kind", "priority") != "priority" or not r.get("applied"):
            continue
        submitter, column = r["submitter"], "factor" if r["mode"] == "factor" else "usage_s"
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
    """Per user (``name``), the hours of each of
    :data:`~probes.accounting.priority.USAGE_METRICS` in the store's records dated in
    ``[since, until)`` (UNIX seconds), summed in the store: core-hours and penalty PE-hours of
    the completed jobs (the penalty where the probe priced them), billed core-hours of the
    running jobs' snapshots."""
    start, end = iso_utc([since, until])
    frames = []
    for kind, totals in _USAGE_TOTALS.items():
        rows = sink.aggregate(Aggregation(kind, ("user",), totals, period=None, since=start, until=end))
        frame = pd.DataFrame(rows, columns=["user", *(t.name for t in totals)])
        frames.append(frame[frame["user"].notna()].set_index("user"))
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
    plan = plan_priorities(creds, neg, config.priority_policy())
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
