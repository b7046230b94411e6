"""Every checkpoint rule of the probe: where a source was read up to, and what a record stands for.

Checkpoints live in the outbox (``Outbox.checkpoint``) and advance only in the transaction of
the records they account for, so a crash leaves either both or neither. This module names
them and says how each one advances; it reads and writes nothing itself.

=====================================  ==========================================================
checkpoint                             value
=====================================  ==========================================================
``history:<path>`` (:func:`history_key`)  a history file or directory: the latest completion time
                                       read and the job ids that completed at that second
``history:schedd:<name>``              a live schedd: the same (``end``, ``ids``), and ``tail``: the
(:func:`checkpoint_key`)               ids of the newest jobs of its history file read (see
                                       :func:`new_schedd_jobs`)
``snapshot:last`` (:data:`SNAPSHOT_KEY`)  ``{"at": UNIX seconds}``: when the last snapshot accounted
                                       was observed (its latest ``observed_at``)
``snapshot:nodes`` (:data:`NODES_KEY`)  the nodes of the last snapshot accounted, and those
                                       missing since, one entry per node (what it offered
                                       and ran when last seen: :mod:`probes.pipeline.gaps`)
``fairshare:ledger`` (:data:`LEDGER_KEY`)  the fairshare usage ledger (rows of
                                       :data:`probes.accounting.ledger.LEDGER_COLUMNS`)
``fairshare:counted`` (:data:`COUNTED_KEY`)  ``{job id: end}`` of the jobs in the ledger that
                                       can still count (each job is counted once)
``fairshare:rolled`` (:data:`ROLLED_KEY`)  ``{"window_start": ...}`` of the last window written
``fairshare:windows`` (:data:`WINDOWS_KEY`)  ``{"interval_s": ...}``: the window width the ledger
                                       and ``rolled`` were counted in (a changed
                                       ``fairshare.interval_s`` re-windows them)
``fairness:bucket`` (:data:`FAIRNESS_KEY`)  the current fairness bucket's sums of allocated and
                                       idle cores per user and its snapshots
                                       (:mod:`probes.pipeline.fairness_buckets`)
=====================================  ==========================================================

A schedd's history file is in the order jobs left its queue, not the order they ended: a
removed job, a job held and then removed, or one whose output took long to come back is written
after jobs that ended later. So a live schedd's checkpoint is a *position* in that file, not a
time: ``tail`` names the newest jobs read (:data:`TAIL` of them, newest first), and the next
pass asks the schedd to stop its backward scan at the second one (``Schedd.history``'s
``since``) and to include the first whatever the job constraint: every job it answers before
the first is new, however long ago it ended. ``end`` and ``ids`` are still kept (a probe
downgraded reads them as before, and they tell a rewritten history from a rotated one). A
checkpoint of a probe from before ``tail`` existed (``end`` and ``ids`` only) is read one more
time under its own rule, in one scan, and the pass leaves a position behind: a site upgrading
neither reads a job twice nor skips one that rule would have read.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "COUNTED_KEY",
    "FAIRNESS_KEY",
    "HISTORY_PREFIX",
    "LEDGER_KEY",
    "NODES_KEY",
    "ON_TIME",
    "ROLLED_KEY",
    "SNAPSHOT_KEY",
    "TAIL",
    "WINDOWS_KEY",
    "checkpoint_key",
    "fairshare_windows",
    "history_key",
    "history_lost",
    "history_name",
    "history_rewritten",
    "new_jobs",
    "new_schedd_jobs",
    "schedd_mark",
    "snapshot_interval",
]

SNAPSHOT_KEY = "snapshot:last"
NODES_KEY = "snapshot:nodes"
LEDGER_KEY = "fairshare:ledger"
COUNTED_KEY = "fairshare:counted"
ROLLED_KEY = "fairshare:rolled"
WINDOWS_KEY = "fairshare:windows"
FAIRNESS_KEY = "fairness:bucket"

_log = logging.getLogger(__name__)

#: How many of the newest jobs of a schedd's history file its checkpoint names (``tail``): the
#: scan stops at the second, so the first comes back and shows the scan reached the position.
TAIL = 2


HISTORY_PREFIX = "history:"
"""What every history checkpoint's key starts with (a file's, a directory's or a schedd's)."""


def history_name(key: str) -> str:
    """The schedd or the file a history checkpoint's ``key`` is of."""
    return key.removeprefix(checkpoint_key("")).removeprefix(HISTORY_PREFIX)


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


def new_schedd_jobs(
    answer: pd.DataFrame, checkpoint: Mapping[str, Any] | None, *, schedd: str = "the schedd"
) -> tuple[pd.DataFrame, dict[str, Any], str | None]:
    """The new jobs of one pass over a schedd's history, the checkpoint after them, and what
    went wrong (None: nothing).

    ``answer`` is the jobs table of the schedd's answer in its order (newest first in the
    history file), asked as :func:`probes.sources.live.history_since` and
    :func:`~probes.sources.live.history_constraint` say for ``checkpoint``. Jobs without an id
    must be left out by the caller (they can be neither recorded nor positioned). The rules:

    - no checkpoint: every job is new;
    - ``tail`` (its newest job ``A``): the jobs before ``A`` are new, ``A`` and what follows
      were read; a job with an id after ``A`` means the schedd scanned past the position it
      was asked to stop at (it does not apply ``since``): still right, but said;
    - ``A`` not answered: the history no longer holds it. If it holds none of ``ids`` either
      (the jobs of the latest end time read), the file was rotated past it and everything
      answered is new (jobs written in between may be gone: said); if it holds some, the
      history was rewritten, and only jobs past ``end``/``ids`` are taken (said);
    - ``end`` and ``ids`` alone (a checkpoint from before ``tail``): their own rule
      (:func:`new_jobs`), once.

    A job answered twice is taken once (its newest place). The new ``tail`` is the newest ids
    answered before ``A``, then the old ``tail``.
    """
    ids = answer["job_id"].to_numpy(dtype=object)
    old_tail = list(checkpoint.get("tail", [])) if checkpoint else []
    problem = None
    upto = len(answer)  # the answer before the checkpoint's position
    if not checkpoint:
        fresh = answer
    elif old_tail:
        hits = np.flatnonzero(ids == old_tail[0])
        if len(hits):
            upto = int(hits[0])
            fresh = answer.iloc[:upto]
            if pd.notna(ids[upto + 1 :]).any() and len(old_tail) > 1:
                problem = (
                    f"{schedd}: its history went on past job {old_tail[1]}, where it was asked to stop (since): "
                    "it does not apply since, so every pass scans its whole history"
                )
        elif answer["job_id"].isin(set(checkpoint.get("ids", []))).any():
            fresh, _ = new_jobs(answer, checkpoint)
            problem = history_rewritten(schedd, old_tail[0], checkpoint["end"])
        else:
            fresh = answer
            problem = history_lost(schedd, old_tail[0])
    else:
        fresh, _ = new_jobs(answer, checkpoint)
    fresh = fresh[~fresh["job_id"].duplicated()].reset_index(drop=True)
    return fresh, schedd_mark(checkpoint, [i for i in ids[:upto] if pd.notna(i)], fresh), problem


def schedd_mark(checkpoint: Mapping[str, Any] | None, newest: Sequence[str], fresh: pd.DataFrame) -> dict[str, Any]:
    """A schedd's checkpoint once ``fresh`` (new jobs) are read: ``newest``, the ids read past
    its position, newest first, lead the ``tail``; ``end`` and ``ids`` move to the latest end
    read. Its ``at`` (a place in the history files) is left out: it named the old position."""
    old_tail = list(checkpoint.get("tail", [])) if checkpoint else []
    tail = list(dict.fromkeys([*newest, *old_tail]))[:TAIL]
    _, latest = new_jobs(fresh, None)
    mark: dict[str, Any] = dict(checkpoint) if checkpoint else {"end": -1.0, "ids": []}
    mark.pop("at", None)
    if latest["end"] > mark["end"]:
        mark.update(latest)
    elif latest["end"] == mark["end"]:
        mark["ids"] = sorted(set(mark["ids"]) | set(latest["ids"]))
    if tail:
        mark["tail"] = tail
    return mark


def history_lost(schedd: str, job: str) -> str:
    """What is said when a schedd's history no longer holds the job where the last pass stopped
    (nor any job read before it)."""
    return (
        f"{schedd}: its history no longer holds job {job}, where the last pass stopped (rotated away: "
        "see MAX_HISTORY_LOG and MAX_HISTORY_ROTATIONS); all it holds was new, jobs written in between may "
        "be lost"
    )


def history_rewritten(schedd: str, job: str, end: float) -> str:
    """What is said when a schedd's history no longer holds the job where the last pass
    stopped, but holds jobs read before it."""
    return (
        f"{schedd}: its history no longer holds job {job}, where the last pass stopped, but holds "
        f"jobs read before it: the history was rewritten; only jobs that ended after {end:.0f} were taken"
    )


ON_TIME = 1.1
"""A snapshot that comes within this many cadences of the last one is that cadence's (the
scheduler starts a job a few milliseconds late, never a tenth of a cycle): it stands for the
whole time since the last one. Later, a cycle was missed, and the rest is a hole."""


def snapshot_interval(
    last: Mapping[str, Any] | None, observed_at: float, *, interval_s: float
) -> tuple[float, float] | None:
    """What a snapshot observed at ``observed_at`` stands for: (seconds, seconds unobserved
    before them). ``last`` is the :data:`SNAPSHOT_KEY` checkpoint.

    - the first snapshot stands for the nominal ``interval_s`` (the cadence);
    - a snapshot within :data:`ON_TIME` cadences of the last one accounted stands for the whole
      time since it;
    - later (a missed cycle, an outage of the probe or of the pool's collector) it stands for
      the cadence only, never longer, and the rest is *unobserved*: nobody saw the pool then
      (jobs may have come and gone), so no slot is claimed to have been empty or full, and the
      snapshot step names the hole per node (:mod:`probes.pipeline.gaps`);
    - a snapshot observed at or before the last one was accounted already (the same dump read
      again, a clock that went back): None, and accounting it again would rewrite its records.
    """
    if not last:
        return interval_s, 0.0
    elapsed = observed_at - float(last["at"])
    if elapsed <= 0:
        return None
    if elapsed > interval_s * ON_TIME:
        return interval_s, elapsed - interval_s
    return elapsed, 0.0


def fairshare_windows(checkpoint: Callable[[str], Any], interval_s: float, *, now: float) -> dict[str, Any]:
    """The checkpoints that put the fairshare ledger and its roll mark in windows of
    ``interval_s`` seconds at ``now`` (UNIX seconds): ``{}`` when they are already, the re-windowed ledger and mark when
    ``fairshare.interval_s`` changed since they were counted (a warning says so), just the
    width when it was never written (a ledger from before this checkpoint is taken to be in
    the configured windows).

    Left in the old windows, a changed width would make every row fall outside the new ones,
    so the fairshare, its records and the priority sync would act on zeros.
    """
    from probes.accounting.ledger import ledger_rewindow  # the ledger's math; this module only names rules

    was = checkpoint(WINDOWS_KEY)
    if was is not None and float(was["interval_s"]) == interval_s:
        return {}
    marks: dict[str, Any] = {WINDOWS_KEY: {"interval_s": interval_s}}
    if was is None:
        return marks
    old = float(was["interval_s"])
    marks[LEDGER_KEY] = ledger_rewindow(checkpoint(LEDGER_KEY) or [], old, interval_s, until=now)
    rolled = checkpoint(ROLLED_KEY)
    if rolled is not None:  # the last new window that ended by the end of the last one rolled
        end = float(rolled["window_start"]) + old
        marks[ROLLED_KEY] = {"window_start": math.floor(end / interval_s) * interval_s - interval_s}
    exact = interval_s % old == 0
    _log.warning(
        "fairshare.interval_s changed from %g s to %g s: the ledger was re-windowed (%s)",
        old, interval_s, "exactly" if exact else "each old window's usage spread evenly over the new ones it overlaps",
    )  # fmt: skip
    return marks
