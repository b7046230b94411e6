"""A job's sets for efficiency by set are drift's (:func:`probes.pipeline.analytics.job_nodes`):
the status files' slots of the startds it ran on, its own ``MachineAttr<attr>0`` only where they
show none, and a job on nodes of two sets split between them by its nodes' cores x walltime.

The hand-built pool is tests/pipeline/test_drift.py's: slot1@fast.example.org (CPUModel EPYC,
HEPSPEC 20) and slot1@slow.example.org (XEON, 10). Its jobs, each 2 cores a node for 1000 s:

  job  nodes        core-s  CPU-s   EPYC core-s / CPU-s   XEON core-s / CPU-s
  x    fast, slow   4000    3000    2000 / 1500           2000 / 1500
  y    fast         2000    2000    2000 / 2000
  z    slow         2000    1000                          2000 / 1000

so EPYC holds 4000 core-s (3500 used: job efficiency 0.875) and XEON 4000 (2500: 0.625), as
drift's dedicated core-s say; x's LastRemoteHost is fast, and taking a job's set from it put
all of x in EPYC: 6000 / 2000 core-s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.sinks.sqlite import EmbeddedStore
from probes.config import ProbeConfig
from probes.pipeline.analytics import UNKNOWN, efficiency_report, history_drift, job_nodes
from probes.pipeline.overhead import overhead_report
from probes.pipeline.records import job_docs, snapshot_docs
from probes.pipeline.stored_efficiency import store_efficiency
from probes.sources.history import read_history
from probes.sources.settings import JobReading, SlotReading
from probes.sources.status import read_status

from .test_drift import write_pool

CONFIG = ProbeConfig()
FAST, SLOW = "slot1@fast.example.org", "slot1@slow.example.org"


def hand_slots(tmp_path: Path) -> pd.DataFrame:
    _, status = write_pool(tmp_path)
    snapshot, _ = read_status([status], SlotReading(speed_attribute="HEPSPEC", extra_attributes=("CPUModel",)))
    return overhead_report(snapshot, CONFIG).slots


def hand_jobs(**columns: list[object]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job_id": ["x", "y", "z"], "user": ["u", "u", "v"],
            "hosts": [f"{FAST},{SLOW}", "slot1_1@fast.example.org", "slot1_1@slow.example.org"],
            "host": [FAST, "slot1_1@fast.example.org", "slot1_1@slow.example.org"],
            "cpus": [2.0, 2.0, 2.0], "n_hosts": [2, 1, 1], "walltime_s": [1000.0] * 3,
            "cpu_time_s": [3000.0, 2000.0, 1000.0], **columns,
        }
    )  # fmt: skip


def test_a_job_on_two_sets_is_split_between_them_as_drift_splits_it(tmp_path: Path) -> None:
    slots, jobs = hand_slots(tmp_path), hand_jobs()
    table = efficiency_report(slots, jobs, CONFIG, by="CPUModel").set_index("set")
    assert table.index.tolist() == ["EPYC", "XEON", "(all)"]
    assert table["job_core_s"].tolist() == [4000.0, 4000.0, 8000.0]  # not 6000 / 2000
    assert table["used_core_s"].tolist() == [3500.0, 2500.0, 6000.0]
    assert table["job"].tolist() == [0.875, 0.625, 0.75]
    assert table["jobs"].tolist() == [2, 2, 3]  # x in each set it ran in, once overall
    drift = history_drift(jobs, slots, "CPUModel", speed_attribute="HEPSPEC").sets.set_index("set")
    assert drift["dedicated_core_s"].tolist() == [4000.0, 4000.0]
    assert drift["jobs"].tolist() == table["jobs"].iloc[:2].tolist()
    nodes = job_nodes(jobs, slots, "CPUModel")
    assert nodes[["job", "host", "set", "share"]].values.tolist() == [
        [0, FAST, "EPYC", 0.5], [0, SLOW, "XEON", 0.5],
        [1, "slot1_1@fast.example.org", "EPYC", 1.0], [2, "slot1_1@slow.example.org", "XEON", 1.0],
    ]  # fmt: skip


def test_a_jobs_own_value_only_where_the_status_files_show_no_node(tmp_path: Path) -> None:
    # x and y carry a MachineAttrHEPSPEC0 that the status files contradict (30, 99): the
    # slots' speeds win; a job on a startd they do not show takes its own (w: 30), else none
    # (v); a job that never ran (n) has no node and no speed
    jobs = pd.concat(
        [
            hand_jobs(speed=[30.0, 99.0, np.nan]),
            pd.DataFrame(
                {"job_id": ["w", "v", "n"], "user": ["u", "u", "u"],
                 "hosts": ["slot1@gone.example.org", "slot1@gone.example.org", None],
                 "host": ["slot1@gone.example.org", "slot1@gone.example.org", None],
                 "cpus": [1.0] * 3, "n_hosts": [1] * 3, "walltime_s": [500.0, 300.0, 0.0],
                 "cpu_time_s": [400.0, 300.0, 0.0], "speed": [30.0, np.nan, np.nan]}
            ),
        ],
        ignore_index=True,
    )  # fmt: skip
    slots = hand_slots(tmp_path)
    table = efficiency_report(slots, jobs, CONFIG, by="speed").set_index("set")
    assert table.index.tolist() == [UNKNOWN, "10.0", "20.0", "30.0", "(all)"]
    assert table["jobs"].tolist() == [2, 2, 2, 1, 6]
    assert table["job_core_s"].tolist() == [300.0, 4000.0, 4000.0, 500.0, 8800.0]
    nodes = job_nodes(jobs, slots, "speed", ["speed"])
    assert nodes["set"].tolist() == [20.0, 10.0, 20.0, 10.0, 30.0, None, None]
    assert nodes["own_set"].tolist() == [False] * 4 + [True, False, False]
    assert pd.isna(nodes["host"].iloc[-1]) and nodes["speed"].isna().tolist() == [False] * 4 + [True] * 3
    drift = history_drift(jobs, slots, "speed", speed_attribute="HEPSPEC")
    assert drift.sets.set_index("set")["jobs"].to_dict() == {10.0: 2, 20.0: 2, 30.0: 1, UNKNOWN: 1}
    assert drift.notes == [
        "1 of 6 jobs name no host (they never ran): left out",
        "2 nodes of 2 jobs ran on startds the status files do not show (e.g. 'gone.example.org'): at their job's pace",
        "1 nodes of 1 jobs are in the set of their job's own 'speed' (the status files give none for them)",
    ]


@pytest.mark.parametrize("by", ["CPUModel", "speed"])
def test_the_store_places_the_jobs_alike(tmp_path: Path, by: str) -> None:
    """The records a probe makes of the hand pool (the slots of its status files, the jobs of
    both tests above: x split, x and y carrying a speed the slots contradict, w on a startd
    they do not show, n never run), summed by the embedded store, give efficiency_report's
    table of the same records."""
    _, status = write_pool(tmp_path)
    snapshot, _ = read_status([status], SlotReading(speed_attribute="HEPSPEC", extra_attributes=("CPUModel",)))
    jobs = hand_jobs(speed=[30.0, 99.0, np.nan])
    jobs = pd.concat(
        [
            jobs,
            pd.DataFrame(
                {"job_id": ["w", "n"], "user": ["u", "u"], "hosts": ["slot1@gone.example.org", None],
                 "host": ["slot1@gone.example.org", None], "cpus": [1.0] * 2, "n_hosts": [1] * 2,
                 "walltime_s": [500.0, 0.0], "cpu_time_s": [400.0, 0.0], "speed": [30.0, np.nan]}
            ),
        ],
        ignore_index=True,
    ).assign(end=float(snapshot.slots["observed_at"].max()) + 60.0)  # fmt: skip
    records = {
        kind: docs.decoded()
        for kind, docs in (
            snapshot_docs(overhead_report(snapshot, CONFIG), idle_known=False, probe="test")
            | job_docs(jobs, probe="test")
        ).items()
    }
    with EmbeddedStore(tmp_path / "store.sqlite") as store:
        for kind in ("slot", "job"):
            store.send(kind, records[kind])
        table = store_efficiency(store, CONFIG, by=by)
    in_memory = efficiency_report(pd.DataFrame(records["slot"]), pd.DataFrame(records["job"]), CONFIG, by=by)
    pd.testing.assert_frame_equal(table, in_memory)
    assert table.set_index("set")["jobs"].to_dict() == (
        {"EPYC": 2, "XEON": 2, UNKNOWN: 2, "(all)": 5}
        if by == "CPUModel"
        else {"10.0": 2, "20.0": 2, "30.0": 1, UNKNOWN: 1, "(all)": 5}
    )


@pytest.fixture
def condor25_tables(condor25: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    jobs, _ = read_history([condor25 / "history.ads"], JobReading(speed_attribute="HEPSPEC"))
    snapshot, _ = read_status([condor25 / "status.ads"], SlotReading(speed_attribute="HEPSPEC"))
    return jobs, overhead_report(snapshot, CONFIG).slots


def test_condor25_jobs_are_in_the_sets_of_their_startds(condor25_tables: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    """Only 11 of condor25's 42 jobs carry MachineAttrHEPSPEC0 (clusters 10-12): taking the
    set from it left 31 jobs "(unknown)", 28 of which ran on the two startds of status.ads.
    From their startds, only the 3 that never ran are unknown, and the sets are drift's."""
    jobs, slots = condor25_tables
    assert int(jobs["speed"].notna().sum()) == 11 and int(jobs["hosts"].isna().sum()) == 3
    table = efficiency_report(slots, jobs, CONFIG, by="speed").set_index("set")
    assert table["jobs"].to_dict() == {UNKNOWN: 3, "10.5": 9, "15.0": 30, "(all)": 42}
    assert table["job_core_s"].to_dict() == {UNKNOWN: 0.0, "10.5": 364.0, "15.0": 3815.0, "(all)": 4179.0}
    drift = history_drift(jobs, slots, "speed", speed_attribute="HEPSPEC").sets
    assert drift.set_index("set")[["jobs", "dedicated_core_s"]].to_dict("list") == {
        "jobs": [9, 30], "dedicated_core_s": [364.0, 3815.0],
    }  # fmt: skip
