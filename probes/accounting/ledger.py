"""The fairshare usage ledger: usage per window and credential, kept between runs of the probe.

The probe service cannot keep every job it ever read; it keeps, per fairshare window, the
usage of each credential combination (:data:`LEDGER_COLUMNS`) and computes the fairshare state
of a window from those rows alone. Pure functions over rows: storing the ledger (a checkpoint
of the outbox) is the caller's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from probes.accounting.fairshare import CREDENTIALS, FairsharePolicy, FairshareResult, fairshare, window_usage

__all__ = ["LEDGER_COLUMNS", "ledger_add", "ledger_fairshare"]

LEDGER_COLUMNS = ("window_start", *dict.fromkeys(CREDENTIALS.values()), "usage")
"""A ledger row: the window's start (UNIX seconds), each credential column, the usage."""


def ledger_add(
    rows: Sequence[Sequence[Any]], jobs: pd.DataFrame, usage: np.ndarray, *, now: float, interval_s: float, depth: int
) -> list[list[Any]]:
    """The ledger (rows of :data:`LEDGER_COLUMNS`) with the usage of ``jobs`` added, spread over
    the ``depth`` windows up to ``now`` that their runs overlap.

    ``jobs`` needs ``end`` and ``walltime_s`` (seconds) and whichever credential columns it has.
    """
    windows, contrib = window_usage(jobs, usage, at=now, interval_s=interval_s, depth=depth)
    creds = list(LEDGER_COLUMNS[1:-1])
    parts = [pd.DataFrame([list(r) for r in rows], columns=list(LEDGER_COLUMNS))] if len(rows) else []
    for n, start in enumerate(windows["start"]):
        used = contrib[:, n] > 0
        if used.any():
            part = pd.DataFrame(
                {c: (jobs[c] if c in jobs.columns else pd.Series(None, index=jobs.index)).astype(object) for c in creds}
            )
            part = part[used].reset_index(drop=True)
            part.insert(0, "window_start", float(start))
            part["usage"] = contrib[used, n]
            parts.append(part)
    if not parts:
        return []
    frame = pd.concat(parts, ignore_index=True)
    summed = frame.groupby(["window_start", *creds], sort=True, dropna=False)["usage"].sum().reset_index()
    return [
        [float(row[0]), *(str(v) if isinstance(v, str) else None for v in row[1:-1]), float(row[-1])]
        for row in summed.itertuples(index=False, name=None)
    ]


def ledger_fairshare(rows: Sequence[Sequence[Any]], window_start: float, policy: FairsharePolicy) -> FairshareResult:
    """The fairshare state at the end of the window starting at ``window_start`` (UNIX
    seconds), from the ledger's rows of the ``policy.depth`` windows up to it, decayed."""
    width = policy.interval_s
    ledger = pd.DataFrame([list(r) for r in rows], columns=list(LEDGER_COLUMNS))
    starts = pd.to_numeric(ledger["window_start"]).to_numpy(dtype=np.float64) if len(ledger) else np.array([])
    ledger = ledger[(starts <= window_start) & (starts > window_start - policy.depth * width)].reset_index(drop=True)
    # each ledger row becomes a job of no walltime in the middle of its window
    ledger["end"] = pd.to_numeric(ledger["window_start"]).astype(np.float64) + width / 2
    ledger["walltime_s"] = 0.0
    usage = pd.to_numeric(ledger["usage"]).to_numpy(dtype=np.float64)
    return fairshare(ledger, usage, policy, at=window_start + width * 0.75)
