"""A job's runs and run times from its ad, as the schedd that ran it says once the run has ended.

HTCondor's per-run counters do not survive a schedd restart. A schedd SIGKILLed and started
again reconnects to the jobs still running (a new shadow each, the ``Job disconnected`` and
``Job reconnected`` events of the job's log) and ends every one of them with
``RemoteWallClockTime``, ``LastRemoteWallClockTime`` and ``CumulativeSlotTime`` counting only the
time after the reconnect (almost 0 for a job that ended while the schedd was down), and with
``JobRunCount``/``NumShadowStarts`` counting the reconnect's shadow as a run. What holds the
whole run (measured on HTCondor 25.0 against the job's event log) is:

- ``CompletionDate - JobCurrentStartDate`` for a completed job: ``JobCurrentStartDate`` is the
  start of the run the job completed in, kept through the reconnect;
- ``CommittedTime``: the wall time of the runs that ended well (completed, or vacated with a
  checkpoint), the last completed one included, and never reset by a restart. It leaves out a
  run evicted without a checkpoint, so it is a lower bound of the wall time, as the reset
  ``RemoteWallClockTime`` is: the larger of the two is taken;
- ``NumJobReconnects``: the shadow's successful reconnects (after a schedd restart, or after a
  network cut the same shadow rode out). A reconnect is not a run: the runs are
  ``JobRunCount - NumJobReconnects``, or ``NumJobStarts`` if more (a start that fails before the
  job executes claims a slot too), 1 at least for a job that started. A reconnect of the same
  shadow (no new ``JobRunCount``) makes that one run short; the bound of the books
  (:mod:`collector.books`) is then one run's worth tighter for that job, never looser.

Units: UNIX seconds and seconds. Pure functions over the columns of a chunk of ads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["RUN_ATTRIBUTES", "or_default", "run_times", "runs"]

RUN_ATTRIBUTES = (
    "JobStatus", "JobStartDate", "JobCurrentStartDate", "CompletionDate", "RemoteWallClockTime",
    "LastRemoteWallClockTime", "LastVacateTime", "CommittedTime", "NumJobStarts", "JobRunCount", "NumJobReconnects",
)  # fmt: skip
"""The job attributes :func:`run_times` reads (numbers; NaN where an ad lacks one)."""

_COMPLETED = 4.0  # JobStatus


def run_times(attr: Callable[[str], np.ndarray], start: np.ndarray, end: np.ndarray) -> dict[str, np.ndarray]:
    """``runs``, ``first_start``, ``earlier_s``, ``ran_from``, ``ran_to`` and ``walltime_s`` of
    the jobs whose :data:`RUN_ATTRIBUTES` ``attr`` gives (a column per name, one value a job),
    whose last run started at ``start`` (``JobCurrentStartDate``, else ``JobStartDate``; NaN:
    never started) and whose record ends at ``end`` (completion or removal), UNIX seconds.

    The last run lasted ``LastRemoteWallClockTime``; for a completed job that reconnected
    (``NumJobReconnects``), ``CompletionDate - JobCurrentStartDate`` if more; without it
    (HTCondor before 23), until the vacate that followed its start (held or evicted, not run
    again), or else its completion or removal. The earlier runs lasted ``RemoteWallClockTime``
    (for a job that reconnected, ``CommittedTime`` if more) less the last run's. ``walltime_s``
    is ``RemoteWallClockTime``; for a job that started and reconnected, the earlier runs and the
    last (``ran_to - ran_from``). A job that never reconnected keeps HTCondor's own counters,
    second for second."""
    started = ~np.isnan(start)
    completed = attr("JobStatus") == _COMPLETED
    wall = or_default(attr("RemoteWallClockTime"), 0.0)
    last = attr("LastRemoteWallClockTime")
    vacated = attr("LastVacateTime")
    ended = np.where(~completed & (vacated >= start), vacated, end)
    # only a reconnected job's counters may have been reset: the others' are as they were read
    reconnected = or_default(attr("NumJobReconnects"), 0.0) > 0
    with np.errstate(invalid="ignore"):
        last = np.where(np.isnan(last), np.clip(ended - start, 0.0, None), last)
        # a completed job's last run ended at its completion: what a restart's reset counter lost
        # (from JobCurrentStartDate only: a job's first start is not its last run's)
        done, began = attr("CompletionDate"), attr("JobCurrentStartDate")
        finished = np.where(reconnected & completed & (done > 0) & (began > 0), done - began, 0.0)
        last = np.fmax(last, finished)
        whole = np.where(reconnected, np.fmax(wall, or_default(attr("CommittedTime"), 0.0)), wall)
        earlier = np.clip(whole - last, 0.0, None)
    first = attr("JobStartDate")
    return {
        "runs": runs(attr, started),
        "first_start": np.where(started, np.fmin(np.where(first > 0, first, start), start), np.nan),
        "earlier_s": np.where(started, earlier, np.nan),
        "ran_from": start - earlier,
        "ran_to": start + last,
        "walltime_s": np.where(started & reconnected, earlier + last, wall),
    }


def runs(attr: Callable[[str], np.ndarray], started: np.ndarray) -> np.ndarray:
    """The times a shadow started each job to run it: ``JobRunCount`` less its reconnects
    (``NumJobReconnects``), or ``NumJobStarts`` if more; 1 at least for a job that ``started``."""
    shadows = np.clip(or_default(attr("JobRunCount"), 0.0) - or_default(attr("NumJobReconnects"), 0.0), 0.0, None)
    counted: np.ndarray = np.fmax(or_default(attr("NumJobStarts"), 0.0), shadows)
    return np.where(started, np.fmax(counted, 1.0), counted)


def or_default(values: np.ndarray, default: float) -> np.ndarray:
    """``values`` with NaN replaced (np.nan_to_num costs more per call than a chunk's rows)."""
    out: np.ndarray = np.where(np.isnan(values), default, values)
    return out
