"""Jobs whose own ad contradicts itself: quarantined with the reason, never billed.

Each value of such a job is in range on its own (:mod:`probes.sources.classad.limits`), but
together they describe a run that cannot have happened, and any bill made of them is wrong:

- ``JobStatus`` outside HTCondor's states, 1 (idle) to 7 (suspended) (``JobStatus = -1``);
- for a job that ended (``JobStatus`` 3, removed, or 4, completed), an end (``CompletionDate``,
  else ``EnteredCurrentStatus`` for a removed job) before its last start
  (``JobCurrentStartDate``, else ``JobStartDate``): a negative run;
- for a job that ended, a ``RemoteWallClockTime`` (the wall time of all its runs, which follow
  one another) longer than the time from its first start (``JobStartDate``, else its ``QDate``)
  to its end, by more than :data:`CLOCK_SLACK_S` (``RemoteWallClockTime = 1e9`` on a 51 s job).


One value can be impossible without the job being so: a CPU time (``RemoteUserCpu +
RemoteSysCpu``) more than :data:`CPU_OVERUSE` times what its cores (``cpus`` x ``n_hosts``) give
over its wall time, plus :data:`CLOCK_SLACK_S` (``RemoteUserCpu = 1e12`` on a one-hour job:
277,777,778 CPU-hours exported). Its wall time and cores were billed by the slots that ran it,
and OSG's condor-ap sends such a job (with its "INVALID DATA" CPU as 0): :func:`impossible_cpu`
names those jobs, whose CPU time the reader leaves out (0 s credited, counted).

A queued or running job (a ``condor_q`` dump read as jobs) has no end yet: only its status is
checked.

A job's times are all written by its schedd and shadow on the submit host, from one clock; the
slack only covers their rounding to whole seconds and a small clock step between writes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CLOCK_SLACK_S", "CPU_OVERUSE", "JOB_STATES", "impossible_cpu", "impossible_jobs"]

JOB_STATES = range(1, 8)
"""HTCondor's ``JobStatus`` values: 1 idle, 2 running, 3 removed, 4 completed, 5 held,
6 transferring output, 7 suspended."""

_ENDED = (3, 4)  # removed, completed: the jobs of a history, whose end is known

CLOCK_SLACK_S = 60.0
"""How much longer than its span (first start to end) a job's ``RemoteWallClockTime`` may be, in
seconds, before the job is impossible."""


CPU_OVERUSE = 16.0
"""How many times its cores' worth of CPU a job may use over its wall time: HTCondor's CPU limit
is a share of the node, not a cap (a job's threads may run on idle cores beyond its request), so
a CPU time somewhat past wall x cores is a real job; 16 times it is no job's."""


def impossible_jobs(columns: dict[str, np.ndarray], job_start_date: np.ndarray) -> dict[int, str]:
    """The rows of the jobs table's ``columns`` (:func:`~probes.sources.history.job_columns`:
    ``status``, ``start``, ``end``, ``qdate``, ``walltime_s``, ``cpu_time_s``, ``cpus``, ``n_hosts``;
    UNIX seconds, seconds, cores; NaN where missing)
    that cannot be a job, each with why (the first rule it breaks, its values named as the ad's
    attributes); ``job_start_date`` is each job's ``JobStartDate`` (its first start)."""
    status, start, end = columns["status"], columns["start"], columns["end"]
    wall, qdate = columns["walltime_s"], columns["qdate"]
    reasons: dict[int, str] = {}
    with np.errstate(invalid="ignore"):  # NaN compares false: a missing value breaks no rule
        # a state is a whole number in JOB_STATES (compared, not np.isin: this runs on every chunk)
        bad_status = ~np.isnan(status) & ~(
            (status >= JOB_STATES.start) & (status < JOB_STATES.stop) & (np.floor(status) == status)
        )
        for i in np.flatnonzero(bad_status).tolist():
            reasons[i] = (
                f"attribute 'JobStatus' = {status[i]:.17g}: HTCondor's job states are "
                f"{JOB_STATES.start} (idle) to {JOB_STATES.stop - 1} (suspended); the job was skipped"
            )
        # only a job that has ended has an end: a queued or running job's "end" is the time it
        # entered its status (EnteredCurrentStatus), a second before its shadow starts it
        ended = (status == _ENDED[0]) | (status == _ENDED[1])
        for i in np.flatnonzero(ended & (end > 0) & (end < start)).tolist():
            reasons.setdefault(
                i,
                f"the job ends (CompletionDate, or EnteredCurrentStatus when removed, {end[i]:.17g}) "
                f"{start[i] - end[i]:.17g} s before it started (JobCurrentStartDate {start[i]:.17g}); "
                "the job was skipped",
            )
        earliest = np.where(job_start_date > 0, job_start_date, np.where(qdate > 0, qdate, np.nan))
        # the last start, if the first is later still (but never the last start alone: runs before it)
        earliest = np.where(np.isnan(start), earliest, np.minimum(earliest, start))
        span = end - earliest
        for i in np.flatnonzero(ended & (wall > span + CLOCK_SLACK_S)).tolist():
            reasons.setdefault(
                i,
                f"attribute 'RemoteWallClockTime' = {wall[i]:.17g}: longer than the {span[i]:.17g} s from its "
                f"first start ({earliest[i]:.17g}) to its end ({end[i]:.17g}) by more than {CLOCK_SLACK_S:g} s; "
                "the job was skipped",
            )
    return reasons


def impossible_cpu(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Where a job of the jobs table's ``columns`` (``status``, ``walltime_s``, ``cpu_time_s``,
    ``cpus``, ``n_hosts``) that ended used more CPU time than :data:`CPU_OVERUSE` times its cores'
    worth over its wall time, plus :data:`CLOCK_SLACK_S` (a running job's wall time is counted
    when a run ends, its CPU time as it goes: ended jobs only)."""
    status, cpu = columns["status"], columns["cpu_time_s"]
    cores = columns["cpus"] * np.fmax(columns["n_hosts"], 1.0)
    with np.errstate(invalid="ignore"):  # NaN compares false: a missing value breaks no rule
        ended = (status == _ENDED[0]) | (status == _ENDED[1])
        beyond: np.ndarray = ended & (cpu > columns["walltime_s"] * cores * CPU_OVERUSE + CLOCK_SLACK_S)
    return beyond
