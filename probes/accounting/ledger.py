"""The fairshare usage ledger: usage per window and credential, kept between runs of the probe.

The probe service cannot keep every job it ever read; it keeps, per fairshare window, the
usage of each credential combination (:data:`LEDGER_COLUMNS`) and computes the fairshare state
of a window from those rows alone. Pure functions over rows: storing the ledger (a checkpoint
of the outbox) is the caller's business.

The ledger counts each job once, as the store does (:func:`ledger_count`): the same job read
again (a renamed schedd, a lost history checkpoint, two schedds reporting one job) adds nothing.
It keeps the ids of the jobs it counted for as long as they can count, i.e. those that ended in
the ``depth`` windows it holds; a job that ended before those adds nothing anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from probes.accounting.fairshare import CREDENTIALS, FairsharePolicy, FairshareResult, fairshare, window_usage

__all__ = ["LEDGER_COLUMNS", "ledger_add", "ledger_count", "ledger_fairshare", "ledger_rewindow", "ledger_rows"]

LEDGER_COLUMNS = ("window_start", *dict.fromkeys(CREDENTIALS.values()), "usage")
"""A ledger row: the window's start (UNIX seconds), each credential column, the usage."""

_BEFORE_SUBMITTER = len(LEDGER_COLUMNS) - 1  # a row of a ledger written before the submitter credential


def ledger_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The ledger's rows as lists of :data:`LEDGER_COLUMNS`; a row of an earlier probe, without
    the submitter (the last credential), names none: the usage it counted stays counted."""
    return [list(r) if len(r) != _BEFORE_SUBMITTER else [*r[:-1], None, r[-1]] for r in rows]


def ledger_add(
    rows: Sequence[Sequence[Any]], jobs: pd.DataFrame, usage: np.ndarray, *, now: float, interval_s: float, depth: int
) -> list[list[Any]]:
    """The ledger (rows of :data:`LEDGER_COLUMNS`) with the usage of ``jobs`` added, spread over
    the ``depth`` windows up to ``now`` that their runs overlap.

    ``jobs`` needs ``end`` and ``walltime_s`` (seconds) and whichever credential columns it has.
    """
    windows, contrib = window_usage(jobs, usage, at=now, interval_s=interval_s, depth=depth)
    creds = list(LEDGER_COLUMNS[1:-1])
    parts = [pd.DataFrame(ledger_rows(rows), columns=list(LEDGER_COLUMNS))] if len(rows) else []
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
    return _summed(pd.concat(parts, ignore_index=True))


def _summed(frame: pd.DataFrame) -> list[list[Any]]:
    """Ledger rows of ``frame``, one per window and credential combination, usage summed."""
    creds = list(LEDGER_COLUMNS[1:-1])
    summed = frame.groupby(["window_start", *creds], sort=True, dropna=False)["usage"].sum().reset_index()
    return [
        [float(row[0]), *(str(v) if isinstance(v, str) else None for v in row[1:-1]), float(row[-1])]
        for row in summed.itertuples(index=False, name=None)
    ]


def ledger_count(
    rows: Sequence[Sequence[Any]],
    counted: Mapping[str, float],
    jobs: pd.DataFrame,
    usage: np.ndarray,
    *,
    now: float,
    interval_s: float,
    depth: int,
) -> tuple[list[list[Any]], dict[str, float]]:
    """:func:`ledger_add` of the jobs not counted yet, and the jobs counted after it.

    ``counted`` maps the ``job_id`` of each job already in the ledger to its end (UNIX
    seconds); a job whose id is there, or appears earlier in ``jobs``, adds nothing. The
    returned map holds the ids of the jobs that ended in the ``depth`` windows up to ``now``
    (older ones could add nothing if read again). A job without an id cannot be recognised and
    is counted.
    """
    ids = jobs["job_id"].astype(object) if "job_id" in jobs.columns else pd.Series(None, index=jobs.index, dtype=object)
    known = ids.notna().to_numpy()
    fresh = ~(ids.isin(list(counted)).to_numpy() | (ids.duplicated().to_numpy() & known))
    values = np.asarray(usage, dtype=np.float64)
    out = ledger_rows(rows)
    if fresh.any():
        fresh_jobs = jobs[fresh].reset_index(drop=True)
        out = ledger_add(rows, fresh_jobs, values[fresh], now=now, interval_s=interval_s, depth=depth)
    horizon = math.floor(now / interval_s) * interval_s - (depth - 1) * interval_s
    end = pd.to_numeric(jobs["end"], errors="coerce").to_numpy(dtype=np.float64)
    keep = fresh & known & (end >= horizon)
    after = {str(i): float(e) for i, e in counted.items() if float(e) >= horizon}
    after |= {str(i): float(e) for i, e in zip(ids[keep], end[keep], strict=True)}
    return out, after


def ledger_fairshare(rows: Sequence[Sequence[Any]], window_start: float, policy: FairsharePolicy) -> FairshareResult:
    """The fairshare state at the end of the window starting at ``window_start`` (UNIX
    seconds), from the ledger's rows of the ``policy.depth`` windows up to it, decayed."""
    width = policy.interval_s
    ledger = pd.DataFrame(ledger_rows(rows), columns=list(LEDGER_COLUMNS))
    starts = pd.to_numeric(ledger["window_start"]).to_numpy(dtype=np.float64) if len(ledger) else np.array([])
    ledger = ledger[(starts <= window_start) & (starts > window_start - policy.depth * width)].reset_index(drop=True)
    # each ledger row becomes a job of no walltime in the middle of its window
    ledger["end"] = pd.to_numeric(ledger["window_start"]).astype(np.float64) + width / 2
    ledger["walltime_s"] = 0.0
    usage = pd.to_numeric(ledger["usage"]).to_numpy(dtype=np.float64)
    return fairshare(ledger, usage, policy, at=window_start + width * 0.75)


def ledger_rewindow(
    rows: Sequence[Sequence[Any]], was_s: float, width_s: float, *, until: float = math.inf
) -> list[list[Any]]:
    """The ledger counted in windows of ``was_s`` seconds, in windows of ``width_s``: each
    row's usage goes to the new windows its old window overlaps, in proportion to the overlap.

    Exact when ``width_s`` is a multiple of ``was_s`` (windows are multiples of their width
    since the epoch, so each old window lies in one new one); finer windows spread an old
    window's usage evenly over it, as the ledger no longer knows when in the window it was used
    (over the part before ``until``, UNIX seconds, for the window still open then).
    """
    frame = pd.DataFrame(ledger_rows(rows), columns=list(LEDGER_COLUMNS))
    if not len(frame) or was_s == width_s:
        return ledger_rows(rows)
    start = pd.to_numeric(frame["window_start"]).to_numpy(dtype=np.float64)
    end = np.maximum(np.minimum(start + was_s, until), start + min(was_s, width_s) * 1e-9)  # never empty
    first = np.floor(start / width_s) * width_s
    spans = int(np.max(np.ceil((end - first) / width_s)))
    parts = []
    for k in range(spans):
        lo = first + k * width_s
        share = np.clip(np.minimum(end, lo + width_s) - np.maximum(start, lo), 0.0, None) / (end - start)
        used = share > 0
        if used.any():
            part = frame[used].copy()
            part["window_start"] = lo[used]
            part["usage"] = pd.to_numeric(part["usage"]).to_numpy(dtype=np.float64) * share[used]
            parts.append(part)
    return _summed(pd.concat(parts, ignore_index=True))
