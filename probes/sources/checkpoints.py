"""Every checkpoint rule of the probe: where a source was read up to, and what a record stands for.

Checkpoints live in the outbox (``Outbox.checkpoint``) and advance only in the transaction of
the records they account for, so a crash leaves either both or neither. This module names
them and says how each one advances; it reads and writes nothing itself.

=====================================  ==========================================================
checkpoint                             value
=====================================  ==========================================================
``history:<path>`` (:func:`history_key`)  a history file or directory: the latest completion time
                                       read and the job ids that completed at that second
``history:schedd:<name>``              the same, for a live schedd (:func:`checkpoint_key`)
(:func:`checkpoint_key`)
``snapshot:last`` (:data:`SNAPSHOT_KEY`)  ``{"at": UNIX seconds}``: when the last snapshot accounted
                                       was observed (its latest ``observed_at``)
``fairshare:ledger`` (:data:`LEDGER_KEY`)  the fairshare usage ledger (rows of
                                       :data:`probes.accounting.ledger.LEDGER_COLUMNS`)
``fairshare:counted`` (:data:`COUNTED_KEY`)  ``{job id: end}`` of the jobs in the ledger that
                                       can still count (each job is counted once)
``fairshare:rolled`` (:data:`ROLLED_KEY`)  ``{"window_start": ...}`` of the last window written
``fairness:bucket`` (:data:`FAIRNESS_KEY`)  the current fairness bucket's sums of allocated and
                                       idle cores per user and its snapshots
                                       (:mod:`probes.pipeline.fairness_buckets`)
=====================================  ==========================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "COUNTED_KEY",
    "FAIRNESS_KEY",
    "LEDGER_KEY",
    "ROLLED_KEY",
    "SNAPSHOT_KEY",
    "checkpoint_key",
    "history_key",
    "new_jobs",
    "snapshot_interval",
]

SNAPSHOT_KEY = "snapshot:last"
LEDGER_KEY = "fairshare:ledger"
COUNTED_KEY = "fairshare:counted"
ROLLED_KEY = "fairshare:rolled"
FAIRNESS_KEY = "fairness:bucket"


def history_key(path: str | os.PathLike[str]) -> str:
    """The checkpoint of a history file or directory."""
    return f"history:{os.path.abspath(path)}"


def checkpoint_key(schedd: str) -> str:
    """The checkpoint of one live schedd's history."""
    return f"history:schedd:{schedd}"


def new_jobs(jobs: pd.DataFrame, checkpoint: Mapping[str, Any] | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The jobs past a history checkpoint, and the checkpoint after them.

    A checkpoint is the latest completion time seen and the ids of the jobs that completed at
    exactly that second, so that a job finishing in the same second as the last one read is
    neither skipped nor counted twice.
    """
    end = pd.to_numeric(jobs["end"], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
    if checkpoint:
        last, seen = float(checkpoint["end"]), set(checkpoint["ids"])
        keep = (end > last) | ((end == last) & ~jobs["job_id"].isin(seen).to_numpy())
        jobs, end = jobs[keep].reset_index(drop=True), end[keep]
    else:
        last, seen = -1.0, set()
    if len(jobs) and end.max() >= last:
        top = float(end.max())
        ids = set(jobs.loc[end == top, "job_id"].dropna()) | (seen if top == last else set())
        return jobs, {"end": top, "ids": sorted(ids)}
    return jobs, dict(checkpoint) if checkpoint else {"end": last, "ids": []}


def snapshot_interval(
    last: Mapping[str, Any] | None, observed_at: float, *, interval_s: float, max_interval_s: float
) -> tuple[float, float] | None:
    """What a snapshot observed at ``observed_at`` stands for: (seconds, seconds unobserved
    before them). ``last`` is the :data:`SNAPSHOT_KEY` checkpoint.

    - the first snapshot stands for the nominal ``interval_s``;
    - a snapshot within ``max_interval_s`` of the last one accounted stands for the whole time
      since it (a late or missed cycle: canonical-unit hours stay right);
    - after a longer gap (an outage of the probe or of the pool's collector) it stands for the
      nominal ``interval_s`` only, and the rest of the gap is *unobserved*: nobody saw the pool
      then (jobs may have come and gone), so no slot is claimed to have been empty or full;
    - a snapshot observed at or before the last one was accounted already (the same dump read
      again, a clock that went back): None, and accounting it again would rewrite its records.
    """
    if not last:
        return interval_s, 0.0
    elapsed = observed_at - float(last["at"])
    if elapsed <= 0:
        return None
    if elapsed > max_interval_s:
        stands = min(interval_s, max_interval_s)
        return stands, elapsed - stands
    return elapsed, 0.0
