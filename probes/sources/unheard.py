"""Which startd ads a snapshot may bill: one core, one job, one instant.

The collector keeps a startd's ads ``CLASSAD_LIFETIME`` (900 s by default) after it last heard
from it, ``LastHeardFrom`` frozen: a startd that died is still listed, its claims with it, while
its jobs may already run elsewhere. A live startd sends every slot's ad (its dynamic slots'
too) every ``UPDATE_INTERVAL`` seconds, and at once on a change of state; ``UPDATE_OFFSET``
delays only its first update after a start or a reconfiguration. So an ad heard from longer
ago than :data:`MARGIN` times its interval has missed at least one periodic update it could
not have skipped (one lost update, or a first update delayed by an ``UPDATE_OFFSET`` of up to
an interval, is within that). Measured on a real HTCondor 25.0.13 pool (``UPDATE_INTERVAL =
10``): ages of 0 to 10 s, never more, for every ad of a live startd.

- A partitionable or static slot heard from too long ago is *unheard*: it is not billed (nor
  its dynamic slots, nor its unallocated amounts), and it is a row of :attr:`Snapshot.unheard`
  (``since``: its ``LastHeardFrom``) and a count of the read's report.
- A dynamic slot heard from too long ago, or left by a previous run of its startd (its
  ``DaemonStartTime`` older than its partitionable slot's: a startd restarted by its master
  does not invalidate the old run's ads), is not billed, and counted.
- A ``GlobalJobId`` is billed on one slot per instant: the copy heard from last (the first of
  them on a tie); each other is counted, and named in the log.

The interval is the ad's own ``UpdateInterval`` where the startd publishes it (HTCondor 25
does not by default; ``STARTD_ATTRS`` can add it), else what the ad shows of its startd's updates
when that is longer than ``pool.update_interval_s`` (the pool's ``UPDATE_INTERVAL`` under
``--condor``): the time from its ``DaemonStartTime`` to its ``LastHeardFrom`` over its
``UpdateSequenceNumber``, the mean step between two of its updates (:func:`observed_interval`).
Glideins set their own interval: one that updates every 300 s in a pool whose startds update
every 10 s is judged by its own steps, not the pool's number. A step is never taken shorter than
the pool's (a startd also updates at once on a change of state: those updates shorten the mean,
never lengthen it), and an ad that stopped being heard keeps the steps it had (its three
attributes freeze together). The ads are
judged at ``now`` (a live read: when the collector answered) or, for a dump, at the newest
``LastHeardFrom`` of its ads (the collector's clock: a dump cannot say when it was taken, so
an ad is judged against the freshest one beside it that is not after the reader's clock; a dump
of a single dead startd cannot tell). An ad without ``LastHeardFrom`` (``condor_status -direct``)
is taken as fresh. Times are UTC seconds.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from probes.sources.classad import AdColumns
from probes.sources.slot_instants import newest_credible

__all__ = [
    "DUPLICATE_JOB",
    "MARGIN",
    "PREVIOUS_RUN",
    "STALE_DYNAMIC",
    "UNBILLED",
    "UNHEARD",
    "UNHEARD_COLUMNS",
    "heard_rules",
    "observed_interval",
    "one_slot_per_job",
]

log = logging.getLogger("fairacct.status")

#: An ad is stale once heard from longer ago than this many update intervals.
MARGIN = 2.0
#: One row per unheard node: ``since`` its ``LastHeardFrom`` (UTC s), what it offered (its
#: ``TotalSlot*``, else its own amounts: cores, MiB, devices), its ``source`` and ``line``.
UNHEARD_COLUMNS = ("name", "machine", "site", "since", "source", "cpus", "memory", "gpus", "line")
#: The reasons counted in a read's report (``rejects``), one count per ad.
UNHEARD = "LastHeardFrom: node not heard from within twice its update interval (unheard), not billed"
STALE_DYNAMIC = "LastHeardFrom: dynamic slot not heard from within twice its update interval, not billed"
PREVIOUS_RUN = "DaemonStartTime: dynamic slot of a previous run of its startd, not billed"
DUPLICATE_JOB = "GlobalJobId: also on a slot heard from later, billed there only"

#: The dynamic slots left out, by a short reason (a metric's label) and the report's reason.
UNBILLED = {"stale": STALE_DYNAMIC, "previous_run": PREVIOUS_RUN, "job_on_another_slot": DUPLICATE_JOB}

_SIZE = {"cpus": ("TotalSlotCpus", "Cpus"), "memory": ("TotalSlotMemory", "Memory"), "gpus": ("TotalSlotGPUs", "GPUs")}


def heard_rules(
    ads: AdColumns,
    dynamic: np.ndarray,
    parents: np.ndarray,
    site: np.ndarray,
    *,
    update_interval_s: float,
    now: float | None,
) -> tuple[np.ndarray, pd.DataFrame, dict[str, int], np.ndarray]:
    """Which ads of ``ads`` are billed, and the unheard nodes.

    ``dynamic``: which ads are dynamic slots; ``parents``: each dynamic slot's partitionable
    slot name (any value elsewhere); ``site``: each ad's site. Returns (a mask of the ads kept,
    the :data:`UNHEARD_COLUMNS` frame, the ads left out counted by reason: what the caller adds
    to its read's report; a reason that left nothing out is absent, and which ads are dynamic
    slots left out as stale while their node is heard: what they held is not known to be free,
    so the caller leaves their node incomplete).
    """
    heard = _numbers(ads, "LastHeardFrom")
    interval = _numbers(ads, "UpdateInterval")
    own = np.fmax(observed_interval(ads), update_interval_s)  # NaN (not shown): the pool's
    interval = np.where(np.isfinite(interval) & (interval > 0), interval, own)
    source = pd.Series(ads.path, dtype=object).fillna("").to_numpy()
    # a dump: its newest ad, by the collector's clock (not one from the future); live: ``now``
    reference = newest_credible(heard, [source]) if now is None else np.full(len(heard), float(now))
    stale = np.isfinite(heard) & (reference - heard > MARGIN * interval)

    names = pd.Series(ads["Name"], dtype=object).fillna("").str.lower().to_numpy()
    node_key = pd.Series(source + "\0" + names)  # a node: its slot's name in its source
    parent_key = pd.Series(source + "\0" + pd.Series(parents, dtype=object).fillna("").str.lower().to_numpy())
    nodes = ~dynamic
    unheard = nodes & stale
    gone = set(node_key[unheard])
    own_start = _numbers(ads, "DaemonStartTime")
    started = pd.Series(own_start[nodes], index=node_key[nodes].to_numpy())
    started = started[~started.index.duplicated()]
    parent_start = started.reindex(parent_key.to_numpy()).to_numpy(dtype=np.float64)
    previous = dynamic & (own_start < parent_start)  # NaN on either side: not known, kept
    orphaned = dynamic & parent_key.isin(gone).to_numpy()
    stale_dynamic = dynamic & stale & ~orphaned
    previous &= ~stale_dynamic & ~orphaned
    keep = ~(unheard | orphaned | stale_dynamic | previous)

    rows = np.flatnonzero(unheard)
    frame = pd.DataFrame(
        {
            "name": ads["Name"][rows],
            "machine": ads["Machine"][rows],
            "site": site[rows],
            "since": heard[rows],
            "source": ads.path[rows],
            **{r: _size(ads, total, own, rows) for r, (total, own) in _SIZE.items()},
            "line": ads.line[rows],
        },
        columns=list(UNHEARD_COLUMNS),
    )
    left_out = {UNHEARD: unheard, STALE_DYNAMIC: stale_dynamic | orphaned, PREVIOUS_RUN: previous}
    counts = {reason: int(mask.sum()) for reason, mask in left_out.items() if mask.any()}
    if len(rows):
        log.warning(
            "unheard, not billed: %s",
            ", ".join(f"{n} (since {s:.0f})" for n, s in zip(frame["name"], frame["since"], strict=True)),
        )
    return keep, frame, counts, stale_dynamic


def one_slot_per_job(allocations: pd.DataFrame, heard: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``allocations`` with each ``job_id`` on one slot per ``observed_at``: the one whose ad
    (its ``ad_row`` in ``heard``, the ads' ``LastHeardFrom``) was heard from last, the first of
    them on a tie. Returns (the kept, the others: the caller counts them, :data:`DUPLICATE_JOB`);
    the others are named in the log. Allocations without a job_id (a claim between two jobs, a ``Child*`` entry) are
    all kept."""
    if allocations.empty:
        return allocations, allocations.iloc[:0]
    job = allocations["job_id"]
    claimed = job.map(lambda v: isinstance(v, str) and v != "").to_numpy(dtype=bool)
    if not claimed.any():
        return allocations, allocations.iloc[:0]
    rows = allocations["ad_row"].to_numpy(dtype=np.int64)
    freshness = np.nan_to_num(heard[rows].astype(np.float64), nan=-np.inf)
    order = pd.DataFrame(
        {"job": job.where(claimed, None), "at": allocations["observed_at"], "heard": -freshness},
        index=allocations.index,
    )
    order = order[claimed].sort_values("heard", kind="stable")  # freshest first, ties in place
    extra = order.duplicated(["job", "at"], keep="first")
    if not extra.any():
        return allocations, allocations.iloc[:0]
    dropped = allocations.loc[extra[extra].index]
    kept = allocations.drop(index=dropped.index)
    winner = kept[kept.index.isin(order.index)].drop_duplicates(["job_id", "observed_at"])
    where = dict(zip(zip(winner["job_id"], winner["observed_at"], strict=True), winner["name"], strict=True))
    log.warning(
        "a job on two slots, billed once: %s",
        ", ".join(
            f"{j} on {n}, billed on {where.get((j, t))}"
            for j, n, t in zip(dropped["job_id"], dropped["name"], dropped["observed_at"], strict=True)
        ),
    )
    return kept, dropped


def _size(ads: AdColumns, total: str, own: str, rows: np.ndarray) -> np.ndarray:
    size = ads[total][rows].astype(np.float64)
    mine = np.nan_to_num(ads[own][rows].astype(np.float64), nan=0.0)
    out: np.ndarray = np.where(np.isnan(size), mine, size)
    return out


def observed_interval(ads: AdColumns) -> np.ndarray:
    """Each ad's mean step between its startd's updates, in seconds: (``LastHeardFrom`` -
    ``DaemonStartTime``) / ``UpdateSequenceNumber``; NaN where an attribute is missing or the
    steps cannot be told (no update counted yet, a clock that went back)."""
    heard, started = _numbers(ads, "LastHeardFrom"), _numbers(ads, "DaemonStartTime")
    updates = _numbers(ads, "UpdateSequenceNumber")
    with np.errstate(invalid="ignore", divide="ignore"):
        step = (heard - started) / updates
    return np.where(np.isfinite(step) & (updates > 0) & (step > 0), step, np.nan)


def _numbers(ads: AdColumns, attr: str) -> np.ndarray:
    """A numeric attribute's values, NaN where absent (or not read at all)."""
    if attr not in ads.columns:
        return np.full(len(ads), np.nan)
    values: np.ndarray = ads[attr].astype(np.float64)
    return values
