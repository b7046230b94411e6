"""From the fairshare state to what HTCondor's negotiator should hold (the priority sync).

Pure: the negotiator's view comes in as a table and the plan goes out as one; reading and
writing the negotiator is :mod:`probes.sources.negotiator`'s business.

The negotiator serves submitters in the order of their *effective* priority, ``EUP = RUP x
factor`` (lower first), where the real priority ``RUP`` follows the negotiator's own decayed
usage and the factor is the administrator's. A sync brings every submitter it touches to the
effective priority fairacct's fairshare asks for,

    ``EUP* = priority_at_target * usage / target``

(usage and target in percent of the delivered usage), so a credential at its target stands at
``priority_at_target`` and one at twice its target at twice that: after a sync the negotiator's
order is fairacct's (the most under-served submitter first). The two modes differ only in the
knob they turn to get there:

- ``factor``: the priority factor (``setFactor``, ``condor_userprio -setfactor``), to
  ``EUP* / RUP``, clipped to ``[factor_min, factor_max]`` (``factor_min >= 1``, as
  ``setFactor`` requires). Factors persist; between syncs the negotiator's real priority moves
  with its usage and the next sync re-aims.
- ``priority``: the real priority (``setPriority``, ``condor_userprio -setprio``), to
  ``EUP* / factor``, at least 0.5 (the negotiator's floor). The negotiator's half-life then
  decays it towards its own usage, so a sync every hour or so keeps it where fairacct wants.

(The accumulated usage, ``-setaccum``, is not a mode: the negotiator never reads it to order
submitters, so setting it changes nobody's service.)

Rules: only submitters whose name matches ``pattern`` (a regular expression, whole name) are
touched; one run moves a value by at most a ratio (``max_factor_ratio``,
``max_priority_ratio``); a credential without a target is left alone (``no target``). Names
are matched exactly: a credential's submitters are the negotiator names its jobs were charged
under (the ledger's ``submitter`` credential, :func:`credential_submitters`), all of them when
a user submits under several (plainly and in accounting groups: each is brought to the user's
``EUP*``); a submitter the negotiator lists and no credential names is reported (``no
credential``), a credential none of whose submitters the negotiator lists too (``unknown``).
A ledger written before the submitter credential falls back on the names: the submitter named
as the credential, or whose name before the ``@`` is it or ends in ``.name``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from probes.accounting._tables import cell_float

__all__ = [
    "MIN_REAL_PRIORITY",
    "PLAN_COLUMNS",
    "SET_COLUMN",
    "USAGE_METRICS",
    "PriorityPolicy",
    "compare_usage",
    "credential_submitters",
    "plan_priorities",
    "userprio_commands",
]

Mode = Literal["factor", "priority"]

MIN_REAL_PRIORITY = 0.5
"""The negotiator's floor on a real priority (its accountant raises anything lower to it)."""

PLAN_COLUMNS = ("submitter", "credential", "mode", "effective", "target", "before", "wanted", "after", "status")
"""A plan row: the negotiator's submitter (None when unknown), the fairshare credential's name
(None for a submitter no credential names), the mode, its effective usage (0..1) and target
(percent), the negotiator's value before (factor, or real priority), the value the fairshare
asks for, the value to set (bounded), and ``set``, ``unchanged``, ``unknown`` (no such
submitter), ``no credential`` (a submitter fairacct has no usage for), ``not matched``
(pattern) or ``no target``."""

SET_COLUMN = {"factor": "factor", "priority": "real_priority", "usage": "usage_s"}
"""The negotiator table's column a mode sets (``usage``: only to restore an older sync)."""


USAGE_METRICS = ("cpu_only", "penalty", "billed")
"""What ``priority compare`` puts beside the negotiator's usage, per credential, in hours:
``cpu_only`` (core-hours: what the default ``SLOT_WEIGHT = Cpus`` charges), ``penalty`` (the
PE-hours of Klusáček & Rudová 2015, "Multi-resource aware fairsharing for heterogeneous
systems") and ``billed`` (the billed core-hours of Andrijauskas et al. 2023, "Defining a canonical
unit for accounting purposes": held cores plus the node's shared
idle ones)."""


@dataclass(frozen=True)
class PriorityPolicy:
    mode: Mode = "factor"
    pattern: str = ".*"
    credential: str = "user"
    factor_min: float = 1.0
    factor_max: float = 1e6
    priority_at_target: float = 1e5
    max_factor_ratio: float = 2.0
    max_priority_ratio: float = 2.0

    def __post_init__(self) -> None:
        if self.mode not in ("factor", "priority"):
            raise ValueError(f"mode must be factor or priority, got {self.mode!r}")
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"pattern {self.pattern!r} is not a regular expression ({exc})") from None
        if not (1.0 <= self.factor_min <= self.factor_max):
            raise ValueError(f"need 1 <= factor_min <= factor_max, got {self.factor_min!r}, {self.factor_max!r}")
        if not self.priority_at_target > 0.0:
            raise ValueError(f"priority_at_target must be above 0, got {self.priority_at_target!r}")
        for name in ("max_factor_ratio", "max_priority_ratio"):
            if not getattr(self, name) >= 1.0:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")


def credential_submitters(ledger: pd.DataFrame, column: str) -> dict[str, list[str]]:
    """Each credential's negotiator submitters, from the ledger's rows: the distinct
    ``submitter`` of the rows naming it in ``column`` (its jobs' own attributes, not a guess
    from names). A credential whose rows name no submitter (a ledger written before the
    submitter credential) is left out: :func:`plan_priorities` then matches it by name."""
    if column not in ledger.columns or "submitter" not in ledger.columns:
        return {}
    pairs = ledger[[column, "submitter"]].dropna().astype(str).drop_duplicates()
    return {str(n): sorted(g["submitter"]) for n, g in pairs.groupby(column, sort=True)}


def _by_name(name: str, submitters: Sequence[str]) -> list[str]:
    if name in submitters:
        return [name]
    return [s for s in submitters if name in (s.split("@", 1)[0], s.split("@", 1)[0].rpartition(".")[2])]


def _wanted(policy: PriorityPolicy, eup: float, real: float, factor: float) -> tuple[float, float, float]:
    """``before``, ``wanted`` and ``after`` (bounded) of one submitter brought to ``eup``."""
    if policy.mode == "factor":
        before, low, high, ratio = factor, policy.factor_min, policy.factor_max, policy.max_factor_ratio
        wanted = float(np.clip(eup / max(real, MIN_REAL_PRIORITY), low, high))
    else:
        before, low, high, ratio = real, MIN_REAL_PRIORITY, math.inf, policy.max_priority_ratio
        wanted = max(eup / factor, low) if factor > 0 else low
    after = float(np.clip(np.clip(wanted, before / ratio, before * ratio), low, high)) if before > 0 else wanted
    return before, wanted, after


def plan_priorities(
    credentials: pd.DataFrame,
    negotiator: pd.DataFrame,
    policy: PriorityPolicy,
    submitters: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """The plan (:data:`PLAN_COLUMNS`): a row per submitter of each credential of type
    ``policy.credential``, then one per submitter the negotiator lists and no credential names.

    ``credentials``: a fairshare result's credentials (``type``, ``name``, ``effective``,
    ``target``). ``negotiator``: one row per submitter the negotiator knows, ``submitter``,
    ``factor`` and ``real_priority``. ``submitters``: each credential's submitter names
    (:func:`credential_submitters`); a credential it does not name is matched by name.
    """
    creds = credentials[credentials["type"] == policy.credential]
    known = [str(s) for s in negotiator["submitter"]]
    current = negotiator.set_index("submitter")
    pattern = re.compile(policy.pattern)
    named = submitters or {}
    rows = []
    seen: set[str] = set()
    for name, effective, target in creds[["name", "effective", "target"]].itertuples(index=False):
        name = str(name)
        row = dict.fromkeys(PLAN_COLUMNS) | {
            "credential": name, "mode": policy.mode, "effective": float(effective), "target": float(target),
        }  # fmt: skip
        mine = [s for s in named[name] if s in current.index] if name in named else _by_name(name, known)
        if not mine:
            rows.append(row | {"status": "unknown"})
            continue
        eup = policy.priority_at_target * 100.0 * float(effective) / float(target) if target > 0 else math.nan
        for submitter in mine:
            seen.add(submitter)
            real, factor = cell_float(current, submitter, "real_priority"), cell_float(current, submitter, "factor")
            before = factor if policy.mode == "factor" else real
            if not pattern.fullmatch(submitter):
                rows.append(row | {"submitter": submitter, "before": before, "status": "not matched"})
                continue
            if math.isnan(eup):
                rows.append(row | {"submitter": submitter, "before": before, "status": "no target"})
                continue
            before, wanted, after = _wanted(policy, eup, real, factor)
            status = "unchanged" if np.isclose(after, before, rtol=1e-9, atol=1e-9) else "set"
            rows.append(row | {"submitter": submitter, "before": before, "wanted": wanted, "after": after,
                               "status": status})  # fmt: skip
    for submitter in known:
        if submitter not in seen:
            before = cell_float(current, submitter, SET_COLUMN[policy.mode])
            rows.append(dict.fromkeys(PLAN_COLUMNS) | {"submitter": submitter, "mode": policy.mode, "before": before,
                                                       "status": "no credential"})  # fmt: skip
    plan = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    for name in ("submitter", "credential"):  # names or None, never NaN: they become records
        plan[name] = plan[name].astype(object).where(plan[name].notna(), None)
    return plan


def userprio_commands(plan: pd.DataFrame, *, restore: bool = False) -> list[str]:
    """The ``condor_userprio`` commands equivalent to the plan's ``set`` rows (``restore``: those
    that put the ``before`` values back)."""
    option = {"factor": "-setfactor", "priority": "-setprio", "usage": "-setaccum"}
    value = "before" if restore else "after"
    todo = plan[plan["status"] == "set"]
    return [
        f"condor_userprio {option[m]} {s} {v:.6g}"
        for s, m, v in todo[["submitter", "mode", value]].itertuples(index=False)
    ]


def compare_usage(negotiator: pd.DataFrame, usage: pd.DataFrame) -> pd.DataFrame:
    """Each submitter's share of the negotiator's usage beside its share under each of
    :data:`USAGE_METRICS`: what the pool's ``SLOT_WEIGHT`` hides.

    ``negotiator``: ``submitter`` and ``usage_s`` (its weighted accumulated usage, seconds).
    ``usage``: one row per submitter name (``name``: the records' ``submitter``, as the
    negotiator names it) and ``<metric>_h`` (hours) per metric, matched by exact name. Returns
    one row per submitter the negotiator lists and then one per name it does not know
    (``submitter`` None): ``credential`` (the name),
    ``negotiator_share`` (percent of the negotiator's usage over its submitters), and per
    metric ``<metric>_h`` and ``<metric>_share`` (percent of the metric's total over every
    credential: the whole pool's, the submitters the negotiator does not know included).
    """
    hours = [f"{m}_h" for m in USAGE_METRICS]
    known = [str(s) for s in negotiator["submitter"]]
    names = [str(n) for n in usage["name"]]
    values = (
        usage[hours].apply(pd.to_numeric).fillna(0.0).to_numpy(dtype=np.float64)
        if len(usage)
        else np.zeros((0, len(hours)))
    )
    ours = pd.DataFrame(values, columns=hours)
    ours.insert(0, "credential", names)
    ours.insert(0, "submitter", [n if n in known else None for n in names])
    totals = ours[hours].sum()
    mapped = (
        ours[ours["submitter"].notna()]
        .groupby("submitter", sort=False)
        .agg({"credential": ",".join, **dict.fromkeys(hours, "sum")})
    )
    out = pd.DataFrame({"submitter": known})
    used = pd.to_numeric(negotiator["usage_s"], errors="coerce").fillna(0.0).to_numpy(dtype=np.float64)
    out["credential"] = out["submitter"].map(mapped["credential"]).astype(object)
    out["credential"] = out["credential"].where(out["credential"].notna(), None)
    out["negotiator_share"] = 100.0 * used / used.sum() if used.sum() > 0 else 0.0
    for h in hours:
        out[h] = out["submitter"].map(mapped[h]).fillna(0.0).astype(np.float64)
    unknown = ours[ours["submitter"].isna()].assign(negotiator_share=np.nan)
    out = pd.concat([out, unknown[out.columns]], ignore_index=True) if len(unknown) else out
    for m, h in zip(USAGE_METRICS, hours, strict=True):
        out[f"{m}_share"] = 100.0 * out[h] / totals[h] if totals[h] > 0 else 0.0
    out["submitter"] = out["submitter"].astype(object).where(out["submitter"].notna(), None)
    order = [
        "submitter",
        "credential",
        "negotiator_share",
        *(c for m in USAGE_METRICS for c in (f"{m}_h", f"{m}_share")),
    ]
    return out[order]
