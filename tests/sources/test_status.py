"""The slots and allocations tables, on real startd dumps."""

from __future__ import annotations

from pathlib import Path

import classad2
import numpy as np
import pandas as pd

from probes.config import ProbeConfig, parse_config
from probes.sources.classad import columns_from_classads
from probes.sources.status import read_status, slot_attrs, snapshot_tables

from ..conftest import DEMO


def test_the_8_core_partitionable_slot(fixtures: Path) -> None:
    snap, report = read_status([fixtures / "classads/status-partitionable8core.ads"])
    assert report.ads == 5 and not report.malformed
    (slot,) = snap.slots.to_dict("records")
    assert slot["name"] == "slot1@ingwe.cs.wisc.edu"
    assert slot["slot_type"] == "Partitionable"
    assert (slot["total_cpus"], slot["total_memory"]) == (8, 15940)
    assert (slot["unallocated_cpus"], slot["unallocated_memory"]) == (4, 15428)
    assert slot["n_dynamic"] == 4
    assert slot["observed_at"] == 1417808323 and slot["site"] == "unknown" and slot["partition"] == "cpu"
    allocs = snap.allocations
    assert list(allocs["parent"].unique()) == ["slot1@ingwe.cs.wisc.edu"]
    assert allocs["cpus"].tolist() == [1, 1, 1, 1] and allocs["memory"].tolist() == [128] * 4
    assert allocs["job_id"].tolist() == [f"ingwe.cs.wisc.edu#2.{i}#1417808297" for i in range(4)]
    # what the slot has left plus what its jobs hold is the whole slot
    assert slot["unallocated_cpus"] + allocs["cpus"].sum() == slot["total_cpus"]
    assert slot["unallocated_memory"] + allocs["memory"].sum() == slot["total_memory"]


def test_the_purdue_glidein_from_its_child_lists(fixtures: Path) -> None:
    """Only the p-slot is in the dump: its 10 jobs come from ChildCpus/ChildMemory/...; all 10
    cores are claimed and memory is left (30000 - 8 x 2048 - 2 x 1280 = 11056 MiB)."""
    snap, _ = read_status([fixtures / "classads/status-glidein-pslot-purdue.ads"])
    (slot,) = snap.slots.to_dict("records")
    assert slot["site"] == "Purdue" and slot["resource_name"] == "Purdue-Hammer"
    assert (slot["total_cpus"], slot["unallocated_cpus"]) == (10, 0)
    assert (slot["total_memory"], slot["unallocated_memory"]) == (30000, 11056)
    assert slot["glidein_to_retire"] == 1481613874 and slot["n_dynamic"] == 10
    allocs = snap.allocations
    assert allocs["from_child_lists"].all() and allocs["job_id"].isna().all()
    assert allocs["cpus"].sum() == 10 and allocs["memory"].sum() == 30000 - 11056
    # the Unix account (ChildRemoteOwner "cmst1@cms") is not who the job was for: the accounting
    # group's user is (ChildAccountingGroup "production.cmsdataops@cms", the negotiator's submitter)
    assert allocs.loc[allocs["name"].str.startswith("slot1_6@"), ["submitter", "user", "group"]].values.tolist() == [
        ["production.cmsdataops@cms", "cmsdataops", "production"]
    ]
    assert set(allocs["site"]) == {"Purdue"} and set(allocs["resource_name"]) == {"Purdue-Hammer"}


def test_the_htcondor_25_pool(condor25: Path) -> None:
    snap, report = read_status([condor25 / "status.ads"])
    slots = snap.slots.set_index("name")
    cpu, gpu = slots.loc["slot1@cpu-node1@vm"], slots.loc["slot1@gpu-node1@vm"]
    assert (cpu["unallocated_cpus"], cpu["unallocated_memory"], cpu["n_dynamic"]) == (0, 22528, 2)
    assert (gpu["unallocated_cpus"], gpu["unallocated_memory"], gpu["unallocated_gpus"]) == (5, 0, 3)
    assert (gpu["total_gpus"], gpu["n_dynamic"], gpu["partition"], cpu["partition"]) == (4, 4, "gpu", "cpu")
    # TotalSlotDisk is a real number in HTCondor 25; GLIDEIN_ToRetire an expression
    assert cpu["total_disk"] == 79115236.0
    assert cpu["glidein_to_retire"] == 1795269281 + 86400  # DaemonStartTime + 86400
    assert cpu["site"] == "LoopbackSite" and report.evaluated == 8
    gpu_jobs = snap.allocations[snap.allocations["parent"] == "slot1@gpu-node1@vm"].sort_values("name")
    assert gpu_jobs[["cpus", "memory", "gpus"]].values.tolist() == [
        [4, 2048, 0],
        [4, 2048, 0],
        [2, 4096, 1],
        [1, 24576, 0],
    ]
    assert set(snap.allocations["group"]) == {"group_atlas", "group_cms", "group_osg"}


def test_json_and_long_dumps_give_the_same_tables(condor25: Path) -> None:
    long, _ = read_status([condor25 / "status.ads"])
    js, _ = read_status([condor25 / "status.json"])
    ignore = ["source", "line"]
    pd.testing.assert_frame_equal(long.slots.drop(columns=ignore), js.slots.drop(columns=ignore))
    pd.testing.assert_frame_equal(long.allocations, js.allocations)


def test_live_classads_give_the_same_tables(condor25: Path) -> None:
    """One conversion path, two inputs: classad2.ClassAd objects (what htcondor2 returns)
    make the same tables as the file reader."""
    config = ProbeConfig()
    ads = list(classad2.parseAds((condor25 / "status.ads").read_text(), classad2.ParserType.Old))
    columns, _ = columns_from_classads(ads, slot_attrs(config.slot_reading()))
    live = snapshot_tables(columns, config.slot_reading())
    files, _ = read_status([condor25 / "status.ads"], config.slot_reading())
    ignore = ["source", "line"]
    pd.testing.assert_frame_equal(live.slots.drop(columns=ignore), files.slots.drop(columns=ignore))
    pd.testing.assert_frame_equal(live.allocations, files.allocations)


def test_configured_site_speed_and_extras(condor25: Path) -> None:
    config = parse_config(
        {
            "pool": {"name": "loop", "interval_s": 60},
            "site": {"attributes": ["NoSuchAttribute"], "default": "T2_XX_Nowhere"},
            "machines": {"speed_attribute": "HEPSPEC"},
            "sources": {"slot_attributes": ["CpuModelNumber", "GLIDEIN_Entry_Name"]},
            "partitions": [{"name": "big", "match": "TotalSlotMemory >= 32768 && TotalSlotGPUs == 0", "cpus": 2}],
        }
    )
    snap, _ = read_status([condor25 / "status.ads"], config.slot_reading())
    slots = snap.slots.set_index("name")
    assert slots["site"].tolist() == ["T2_XX_Nowhere"] * 2 and set(slots["pool"]) == {"loop"}
    assert slots["speed"].tolist() == [10.5, 15.0]  # HEPSPEC of the CPU and the GPU node
    assert slots["GLIDEIN_Entry_Name"].tolist() == ["Loop_CE1_cpu", "Loop_CE1_gpu"]
    # the GPU node matches no partition: reported as None, not guessed
    assert slots["partition"].iloc[0] == "big" and pd.isna(slots["partition"].iloc[1])
    assert set(snap.allocations["interval_s"]) == {60}


def test_the_demo_pool() -> None:
    snap, report = read_status([DEMO / "status.ads"])
    slots = snap.slots
    assert report.ads == 106 and len(slots) == 36 and len(snap.allocations) == 72
    assert (slots["slot_type"] == "Static").sum() == 4
    assert (slots["n_dynamic"] == 0).sum() >= 4  # empty pilots and idle static slots
    # per slot: unallocated + what its jobs hold = the whole slot, for every resource
    held = snap.allocations.groupby("parent")[["cpus", "memory", "gpus"]].sum()
    part = slots[slots["slot_type"] == "Partitionable"].set_index("name")
    for r in ("cpus", "memory", "gpus"):
        total = part[f"unallocated_{r}"] + held[r].reindex(part.index).fillna(0)
        assert np.allclose(total, part[f"total_{r}"]), r
