"""A job's run times and runs through a schedd restart: what the schedd says once the run has
ended, not the counters the restart reset (:mod:`probes.sources.run_times`).

The ads are those HTCondor 25.0.13 wrote on this project's pool for jobs that ran across a
schedd SIGKILLed and restarted by its master (its attributes copied from ``condor_history -long``;
the job's event log: executing at 1796675926, reconnected after the restart, terminated at
1796675986 for the 60 s job, 1796675947 for the 21 s one that ended while the schedd was down).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from probes.sources.history import read_history
from probes.sources.run_times import RUN_ATTRIBUTES, run_times

_COMMON = """MyType = "Job"
ClusterId = {cluster}
ProcId = 0
GlobalJobId = "vm#{cluster}.0#1796675917"
RequestCpus = {cpus}
CpusProvisioned = {cpus}
QDate = 1796675917
JobStatus = 4
JobStartDate = 1796675926
JobCurrentStartDate = 1796675926
JobCurrentStartExecutingDate = 1796675926
"""
# a 60 s run across the restart: the counters hold the 40 s after the reconnect, and a run
RESTARTED = (
    _COMMON.format(cluster=1, cpus=2)
    + """CompletionDate = 1796675986
EnteredCurrentStatus = 1796675986
RemoteWallClockTime = 40.0
LastRemoteWallClockTime = 40.0
CumulativeSlotTime = 80.0
CommittedTime = 60
CommittedSlotTime = 120.0
JobRunCount = 2
NumJobStarts = 0
NumShadowStarts = 2
NumJobReconnects = 1
"""
)
# a 21 s run that ended while the schedd was down: 1 s after the reconnect
ENDED_WHILE_DOWN = (
    _COMMON.format(cluster=2, cpus=1)
    + """CompletionDate = 1796675947
EnteredCurrentStatus = 1796675947
RemoteWallClockTime = 1.0
LastRemoteWallClockTime = 1.0
CumulativeSlotTime = 1.0
CommittedTime = 21
JobRunCount = 2
NumJobStarts = 0
NumShadowStarts = 2
NumJobReconnects = 1
"""
)
# the same pool's job without a restart: evicted once (25 s, not committed), then ran 30 s
EVICTED = _COMMON.format(cluster=3, cpus=1).replace(
    "JobCurrentStartDate = 1796675926", "JobCurrentStartDate = 1796675960"
) + """CompletionDate = 1796675990
EnteredCurrentStatus = 1796675990
RemoteWallClockTime = 55.0
LastRemoteWallClockTime = 30.0
CommittedTime = 30
JobRunCount = 2
NumJobStarts = 2
"""  # fmt: skip


def test_a_run_across_a_schedd_restart_is_its_whole_run_and_one_run(tmp_path: Path) -> None:
    path = tmp_path / "history"
    path.write_text("\n".join([RESTARTED, ENDED_WHILE_DOWN, EVICTED]), encoding="utf-8")
    jobs, report = read_history([path])
    assert not report.malformed
    by = jobs.set_index("cluster")
    # 1796675986 - 1796675926: the event log's 60 s, not RemoteWallClockTime's 40
    assert by.loc[1, "walltime_s"] == 60.0 and by.loc[1, "runs"] == 1
    assert (by.loc[1, "ran_from"], by.loc[1, "ran_to"]) == (1796675926, 1796675986)
    assert by.loc[1, "earlier_s"] == 0.0
    # ended while the schedd was down: 21 s (CommittedTime, and its completion), not 1
    assert by.loc[2, "walltime_s"] == 21.0 and by.loc[2, "runs"] == 1
    assert (by.loc[2, "ran_from"], by.loc[2, "ran_to"]) == (1796675926, 1796675947)
    # no reconnect: HTCondor's own counters, the evicted run (25 s) before the last (30 s)
    assert by.loc[3, "walltime_s"] == 55.0 and by.loc[3, "runs"] == 2 and by.loc[3, "earlier_s"] == 25.0
    assert (by.loc[3, "ran_from"], by.loc[3, "ran_to"]) == (1796675960 - 25, 1796675990)


def _ads(**columns: list[float]) -> dict[str, np.ndarray]:
    n = len(next(iter(columns.values())))
    out = {name: np.full(n, np.nan) for name in RUN_ATTRIBUTES}
    out.update({name: np.array(values, dtype=np.float64) for name, values in columns.items()})
    return out


def test_reconnected_runs_take_the_larger_of_the_counters_and_what_the_schedd_kept() -> None:
    ads = _ads(
        # 0: reconnected, evicted once before (CommittedTime leaves that run out: RemoteWallClockTime
        #    holds 100 s of it and the 20 s after the reconnect); its last run 50 s to its completion
        # 1: reconnected and removed while running: no completion, its counters stand (30 s)
        # 2: a reconnect of the same shadow (a network cut): JobRunCount 1, a run still
        # 3: never started
        JobStatus=[4, 3, 4, 3],
        JobStartDate=[1000, 1000, 1000, np.nan],
        JobCurrentStartDate=[1200, 1100, 1000, np.nan],
        CompletionDate=[1250, 0, 1100, 0],
        RemoteWallClockTime=[120, 30, 100, 0],
        LastRemoteWallClockTime=[20, 30, 100, np.nan],
        CommittedTime=[50, 0, 100, 0],
        JobRunCount=[3, 2, 1, 0],
        NumJobStarts=[0, 1, 1, 0],
        NumJobReconnects=[1, 1, 1, np.nan],
    )
    start = np.array([1200.0, 1100.0, 1000.0, np.nan])
    end = np.array([1250.0, 1500.0, 1100.0, 900.0])
    got = run_times(ads.__getitem__, start, end)
    assert list(got["runs"]) == [2, 1, 1, 0]
    # 0: last 50 s (1250 - 1200), earlier max(120, 50) - 50 = 70 s; 1: 30 s, none earlier
    assert list(got["ran_to"][:3]) == [1250.0, 1130.0, 1100.0]
    assert list(got["earlier_s"][:3]) == [70.0, 0.0, 0.0]
    assert list(got["walltime_s"]) == [120.0, 30.0, 100.0, 0.0]
    assert list(got["ran_from"][:3]) == [1130.0, 1100.0, 1000.0]
    assert np.isnan(got["ran_from"][3]) and np.isnan(got["first_start"][3])


@pytest.mark.parametrize("attr", ["NumJobReconnects", "CommittedTime"])
def test_the_restart_attributes_are_read_from_the_history(attr: str) -> None:
    from probes.sources.history import job_attrs
    from probes.sources.settings import JobReading

    assert attr in {a.name for a in job_attrs(JobReading())}
