"""Drift (seed 001) from a job history: the reader keeps every slot a parallel job held, and
:func:`probes.pipeline.analytics.history_drift` prices what the faster nodes lost waiting.

The pool below is written by hand, as ``condor_history -long`` and ``condor_status -long``
print it: a parallel-universe job (the dedicated scheduler writes ``RemoteHosts`` and
``AllRemoteHosts``, the slots' names) on two machines of different CPU models and speeds, and a
vanilla job (``LastRemoteHost`` only) on the fast one.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collector.errors import ConfigError
from probes.pipeline.analytics import UNKNOWN, history_drift, job_nodes
from probes.sources.history import read_history
from probes.sources.settings import JobReading, SlotReading
from probes.sources.status import read_status

HISTORY = """\
MyType = "Job"
GlobalJobId = "submit.example.org#7.0#1700000000"
ClusterId = 7
ProcId = 0
Owner = "alice"
JobUniverse = 11
MaxHosts = 2
MinHosts = 2
RequestCpus = 4
JobStatus = 4
QDate = 1700000000
JobCurrentStartDate = 1700000100
CompletionDate = 1700003700
RemoteWallClockTime = 3600.0
RemoteUserCpu = 14400.0
RemoteHosts = "slot1@fast.example.org,slot1@slow.example.org"
AllRemoteHosts = "slot1@fast.example.org,slot1@slow.example.org"
LastRemoteHost = "slot1@fast.example.org"

MyType = "Job"
GlobalJobId = "submit.example.org#8.0#1700000000"
ClusterId = 8
ProcId = 0
Owner = "bob"
JobUniverse = 5
MaxHosts = 1
RequestCpus = 2
JobStatus = 4
QDate = 1700000000
JobCurrentStartDate = 1700000100
CompletionDate = 1700001900
RemoteWallClockTime = 1800.0
RemoteUserCpu = 3000.0
LastRemoteHost = "slot1_1@fast.example.org"

"""

STATUS = """\
MyType = "Machine"
Name = "slot1@fast.example.org"
Machine = "fast.example.org"
SlotType = "Partitionable"
PartitionableSlot = true
State = "Unclaimed"
Cpus = 2
Memory = 8192
Disk = 1000000
TotalSlotCpus = 8
TotalSlotMemory = 16384
TotalSlotDisk = 1000000
CPUModel = "EPYC"
HEPSPEC = 20.0
MyCurrentTime = 1700003700

MyType = "Machine"
Name = "slot1@slow.example.org"
Machine = "slow.example.org"
SlotType = "Partitionable"
PartitionableSlot = true
State = "Unclaimed"
Cpus = 8
Memory = 16384
Disk = 1000000
TotalSlotCpus = 8
TotalSlotMemory = 16384
TotalSlotDisk = 1000000
CPUModel = "XEON"
HEPSPEC = 10.0
MyCurrentTime = 1700003700

"""


def write_pool(tmp_path: Path) -> tuple[Path, Path]:
    history, status = tmp_path / "history.ads", tmp_path / "status.ads"
    history.write_text(HISTORY)
    status.write_text(STATUS)
    return history, status


@pytest.fixture
def pool(tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    history, status = write_pool(tmp_path)
    jobs, report = read_history([history], JobReading(speed_attribute="HEPSPEC"))
    assert not report.malformed
    snapshot, _ = read_status([status], SlotReading(speed_attribute="HEPSPEC", extra_attributes=("CPUModel",)))
    return jobs, snapshot.slots


def test_the_reader_keeps_every_slot_of_a_parallel_job(pool: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    jobs, _ = pool
    assert jobs["hosts"].tolist() == ["slot1@fast.example.org,slot1@slow.example.org", "slot1_1@fast.example.org"]
    assert jobs["n_hosts"].tolist() == [2, 1]


def test_the_hosts_are_what_classad2_reads(tmp_path: Path) -> None:
    import json

    import classad2

    history, _ = write_pool(tmp_path)
    ads = list(classad2.parseAds(history.read_text(), classad2.ParserType.Old))
    expected = [ad.get("RemoteHosts", ad.get("AllRemoteHosts", ad.get("LastRemoteHost"))) for ad in ads]
    as_json = tmp_path / "history.json"  # what condor_history -json prints
    as_json.write_text(json.dumps([{k: ad.eval(k) for k in ad} for ad in ads]))
    for path in (history, as_json):
        jobs, report = read_history([path])
        assert jobs["hosts"].tolist() == expected and not report.malformed, path
    # an ad that kept only the documented AllRemoteHosts
    only_all = tmp_path / "only_all.ads"
    only_all.write_text("\n".join(line for line in HISTORY.splitlines() if not line.startswith("RemoteHosts")) + "\n")
    assert read_history([only_all])[0]["hosts"].tolist() == expected


def test_drift_of_a_parallel_job_on_two_speeds(pool: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    jobs, slots = pool
    drift = history_drift(jobs, slots, "CPUModel", speed_attribute="HEPSPEC")
    # the parallel job holds 2 nodes x 4 cores x 3600 s; at the slow node's pace (10 of 20) the
    # fast node's 4 cores idle half the time: 4 x 3600 x 0.5 = 7200 core-s = 2 core-hours
    summary = drift.summary.iloc[0]
    assert (summary["jobs"], summary["mixed_jobs"], summary["mixed_share"]) == (2, 1, 0.5)
    assert summary["dedicated_core_s"] == 2 * 4 * 3600 + 2 * 1800
    assert summary["lost_core_s"] == 7200.0 and summary["lost_core_h"] == 2.0
    assert summary["unknown_nodes"] == 0
    sets = drift.sets.set_index("set")
    assert sets.loc["EPYC", ["jobs", "mixed_jobs", "dedicated_core_s", "lost_core_s"]].tolist() == [
        2,
        1,
        4 * 3600 + 2 * 1800,
        7200.0,
    ]
    assert sets.loc["XEON", ["jobs", "mixed_jobs", "dedicated_core_s", "lost_core_s"]].tolist() == [1, 1, 4 * 3600, 0.0]
    users = drift.users.set_index("user")
    assert users.loc["alice", ["mixed_jobs", "lost_core_s", "lost_share"]].tolist() == [1, 7200.0, 0.25]
    assert users.loc["bob", ["mixed_jobs", "lost_core_s"]].tolist() == [0, 0.0]
    assert drift.notes == []


def test_without_a_speed_attribute_nothing_is_lost_but_the_mix_is_counted(tmp_path: Path) -> None:
    history, status = write_pool(tmp_path)
    jobs, _ = read_history([history])
    snapshot, _ = read_status([status], SlotReading(extra_attributes=("CPUModel",)))
    drift = history_drift(jobs, snapshot.slots, "CPUModel")
    assert drift.summary[["mixed_jobs", "lost_core_s"]].iloc[0].tolist() == [1, 0.0]
    assert drift.notes == [
        "machines.speed_attribute is not set: every node counts at speed 1.0, so nothing is lost to drift"
    ]


def test_a_machine_the_status_does_not_show(pool: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    jobs, slots = pool
    drift = history_drift(jobs, slots[slots["machine"] == "fast.example.org"], "CPUModel", speed_attribute="HEPSPEC")
    # the slow node is unknown: it runs at its job's pace, so the job is neither mixed nor slowed
    assert drift.summary[["mixed_jobs", "lost_core_s", "unknown_nodes"]].iloc[0].tolist() == [0, 0.0, 1]
    assert drift.sets["set"].tolist() == [UNKNOWN, "EPYC"]
    assert drift.notes == [
        "1 nodes of 1 jobs ran on startds the status files do not show (e.g. 'slow.example.org'): "
        "set '(unknown)', at their job's pace"
    ]


def test_drift_by_an_attribute_the_slots_lack(pool: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    jobs, slots = pool
    with pytest.raises(ConfigError, match=r"--by 'NoSuchAttr': the slots have no such attribute"):
        history_drift(jobs, slots, "NoSuchAttr")


def test_the_real_pool_runs_vanilla_jobs_only(fixtures: Path) -> None:
    condor25 = fixtures / "condor25"
    jobs, _ = read_history([condor25 / "history.ads"], JobReading(speed_attribute="HEPSPEC"))
    snapshot, _ = read_status([condor25 / "status.ads"], SlotReading(speed_attribute="HEPSPEC"))
    assert jobs["hosts"].equals(jobs["host"])  # no RemoteHosts: each ran on its LastRemoteHost
    drift = history_drift(jobs, snapshot.slots, "speed", speed_attribute="HEPSPEC")
    summary = drift.summary.iloc[0]
    assert (len(jobs), summary["jobs"], summary["mixed_jobs"], summary["lost_core_s"], summary["unknown_nodes"]) == (
        42,
        39,
        0,
        0.0,
        0,
    )
    assert drift.notes == ["3 of 42 jobs name no host (they never ran): left out"]
    # two startds on one host ("vm"): each node takes its own startd's speed, not the host's first
    assert drift.sets.set_index("set")["jobs"].to_dict() == {10.5: 9, 15.0: 30}


def test_a_node_known_by_its_machine_only() -> None:
    # a glidein's slot is "slot1@glidein_1@wn1..."; a job that names the host alone still finds it
    slots = pd.DataFrame(
        {"name": ["slot1@glidein_1@wn1.example.org", "slot1@wn2.example.org"],
         "machine": ["WN1.example.org", "wn2.example.org"],
         "speed": [10.0, 20.0], "model": ["old", "new"]}
    )  # fmt: skip
    jobs = pd.DataFrame(
        {"hosts": ["slot1@wn1.example.org,slot2@wn2.example.org"], "user": ["u"], "cpus": [1.0], "walltime_s": [100.0]}
    )
    drift = history_drift(jobs, slots, "model", speed_attribute="HEPSPEC")
    assert drift.nodes[["startd", "set", "speed", "lost_core_s"]].values.tolist() == [
        ["wn1.example.org", "old", 10.0, 0.0], ["wn2.example.org", "new", 20.0, 50.0],
    ]  # fmt: skip


def test_efficiency_puts_each_job_in_its_own_startds_set(fixtures: Path) -> None:
    """condor25's host "vm" runs two startds (HEPSPEC 10.5 and 15.0): a job's set is its
    startd's, as for drift (matching the host alone put every job under 10.5)."""
    condor25 = fixtures / "condor25"
    jobs, _ = read_history([condor25 / "history.ads"], JobReading(speed_attribute="HEPSPEC"))
    snapshot, _ = read_status([condor25 / "status.ads"], SlotReading(speed_attribute="HEPSPEC"))
    # without the job's own MachineAttrHEPSPEC0, each job takes its node's speed
    sets = job_nodes(jobs.drop(columns="speed"), snapshot.slots, "speed")["set"]
    assert sets.value_counts().to_dict() == {15.0: 30, 10.5: 9} and int(sets.isna().sum()) == 3  # 3 never ran
