"""From the fairshare state to what HTCondor's negotiator should hold (the priority sync).

Pure: the negotiator's view comes in as a table and the plan goes out as one; reading and
writing the negotiator is :mod:`probes.sources.negotiator`'s business.

Two modes, the operator's choice:

- ``usage``: the credential's decayed usage (the fairshare metric: core-seconds, PE-seconds,
  CPU seconds or penalty-seconds) as the negotiator's accumulated usage, which is in weighted
  seconds (``setUsage`` and ``condor_userprio -setaccum`` both take seconds on HTCondor 25.0,
  whatever the bindings' docstring says; ``condor_userprio`` shows it in hours), so that the
  negotiator's own half-life keeps decaying it;
- ``factor``: ``factor_at_target * usage / target`` (usage and target in percent of the
  delivered usage), clipped to ``[factor_min, factor_max]`` (``factor_min >= 1``, as
  ``setFactor`` requires), so a credential at its target gets ``factor_at_target``, one at
  twice its target twice that. A credential without a target is left alone in this mode.

Rules: only submitters whose name matches ``pattern`` (a regular expression, whole name) are
touched; one run moves a factor by at most a ratio ``max_factor_ratio`` and a usage by at most
``max_usage_change_s`` seconds; a credential with no submitter in the negotiator is skipped and
reported (``unknown``). A credential matches the one submitter of the same name, or whose name
before the ``@`` is its name (the negotiator names ``user@uid_domain``), or ends in ``.name``
there (``group_cms.alice@uid_domain``: a user submitting in an accounting group).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from probes.accounting._tables import cell_float

__all__ = ["PLAN_COLUMNS", "USAGE_METRICS", "PriorityPolicy", "compare_usage", "plan_priorities", "userprio_commands"]

Mode = Literal["usage", "factor"]

PLAN_COLUMNS = ("submitter", "credential", "mode", "effective", "target", "before", "wanted", "after", "status")
"""A plan row: the negotiator's submitter (None when unknown), the fairshare credential's name,
the mode, its effective usage (0..1) and target (percent), the negotiator's value before, the
value the fairshare asks for, the value to set (bounded), and ``set``, ``unchanged``,
``unknown`` (no such submitter), ``not matched`` (pattern) or ``no target`` (factor mode)."""


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
    factor_at_target: float = 1000.0
    max_factor_ratio: float = 2.0
    max_usage_change_s: float = 3.6e6

    def __post_init__(self) -> None:
        if self.mode not in ("usage", "factor"):
            raise ValueError(f"mode must be usage or factor, got {self.mode!r}")
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"pattern {self.pattern!r} is not a regular expression ({exc})") from None
        if not (1.0 <= self.factor_min <= self.factor_max):
            raise ValueError(f"need 1 <= factor_min <= factor_max, got {self.factor_min!r}, {self.factor_max!r}")
        if not self.max_factor_ratio >= 1.0:
            raise ValueError(f"max_factor_ratio must be at least 1, got {self.max_factor_ratio!r}")
        if not self.max_usage_change_s >= 0.0:
            raise ValueError(f"max_usage_change_s must be at least 0, got {self.max_usage_change_s!r}")


def _submitter_of(name: str, submitters: list[str]) -> str | None:
    if name in submitters:
        return name
    local = [s for s in submitters if name in (s.split("@", 1)[0], s.split("@", 1)[0].rpartition(".")[2])]
    return local[0] if len(local) == 1 else None


def plan_priorities(credentials: pd.DataFrame, negotiator: pd.DataFrame, policy: PriorityPolicy) -> pd.DataFrame:
    """The plan (:data:`PLAN_COLUMNS`) for each credential of type ``policy.credential``.

    ``credentials``: a fairshare result's credentials (``type``, ``name``, ``decayed``,
    ``effective``, ``target``). ``negotiator``: one row per submitter the negotiator knows,
    ``submitter``, ``factor`` and ``usage_s`` (its weighted accumulated usage in seconds).
    """
    creds = credentials[credentials["type"] == policy.credential]
    known = [str(s) for s in negotiator["submitter"]]
    current = negotiator.set_index("submitter")
    column = "factor" if policy.mode == "factor" else "usage_s"
    pattern = re.compile(policy.pattern)
    rows = []
    for name, decayed, effective, target in creds[["name", "decayed", "effective", "target"]].itertuples(index=False):
        submitter = _submitter_of(str(name), known)
        row = dict.fromkeys(PLAN_COLUMNS)
        row.update(
            submitter=submitter,
            credential=str(name),
            mode=policy.mode,
            effective=float(effective),
            target=float(target),
        )
        if submitter is None:
            rows.append({**row, "status": "unknown"})
            continue
        before = cell_float(current, submitter, column)
        row["before"] = before
        if not pattern.fullmatch(submitter):
            rows.append({**row, "status": "not matched"})
            continue
        if policy.mode == "factor":
            if not (target > 0):
                rows.append({**row, "status": "no target"})
                continue
            wanted = float(
                np.clip(policy.factor_at_target * 100.0 * effective / target, policy.factor_min, policy.factor_max)
            )
            low, high = before / policy.max_factor_ratio, before * policy.max_factor_ratio
            after = float(np.clip(np.clip(wanted, low, high), policy.factor_min, policy.factor_max))
        else:
            wanted = float(decayed)
            step = policy.max_usage_change_s
            after = float(np.clip(wanted, max(before - step, 0.0), before + step))
        status = "unchanged" if np.isclose(after, before, rtol=1e-9, atol=1e-9) else "set"
        rows.append({**row, "wanted": wanted, "after": after, "status": status})
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


def userprio_commands(plan: pd.DataFrame, *, restore: bool = False) -> list[str]:
    """The ``condor_userprio`` commands equivalent to the plan's ``set`` rows (``restore``: those
    that put the ``before`` values back)."""
    option = {"factor": "-setfactor", "usage": "-setaccum"}
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
    ``usage``: one row per credential, ``name`` and ``<metric>_h`` (hours) per metric. A
    credential is matched to a submitter as the sync matches it. Returns one row per submitter
    (by name; credentials of one submitter summed, their names joined by ``,``) and then one
    per credential the negotiator does not know (``submitter`` None): ``credential``,
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
    ours.insert(0, "submitter", [_submitter_of(n, known) for n in names])
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
