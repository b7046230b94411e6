"""The slots and allocations tables, on real startd dumps."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import classad2
import numpy as np
import pandas as pd
import pytest

from probes.config import ProbeConfig, parse_config
from probes.pipeline.overhead import overhead_report
from probes.sources.classad import columns_from_classads
from probes.sources.report import Malformed
from probes.sources.status import Snapshot, read_status, slot_attrs, snapshot_tables

from ..conftest import DEMO


def test_the_8_core_partitionable_slot(fixtures: Path, tmp_path: Path) -> None:
    """HTCondor's test suite keeps this dump without the blank line condor_status -long writes
    after its last ad: as stored, that ad is set aside as cut by the end of its file (issue 51)
    and its node left incomplete; with the blank line, every ad is read."""
    stored = fixtures / "classads/status-partitionable8core.ads"
    cut, report = read_status([stored])
    assert [m.reason.split(":")[0] for m in report.malformed] == ["cut by the end of its file"]
    assert cut.slots["incomplete"].tolist() == [True] and len(cut.allocations) == 3
    whole = tmp_path / "status.ads"
    whole.write_bytes(stored.read_bytes() + b"\n")
    snap, report = read_status([whole])
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
    live, _ = snapshot_tables(columns, config.slot_reading())
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


# -- a node's allocations are its dynamic-slot ads (DESIGN.md, Tables) -----------------------------
# Hand-built ads of an 8-core, 16384 MiB partitionable slot at one instant. Its own Cpus/Memory and
# Child* lists are as of its last update; its dynamic slots' ads are what the collector has now.

T = 1795300000


def pslot(name: str, left: tuple[int, int], children: list[tuple[str, int, int]]) -> str:
    """A p-slot of 8 cores and 16384 MiB with ``left`` (cores, MiB) of its own and ``children``
    (name, cores, MiB) in its Child* lists."""
    machine = name.split("@", 1)[1]
    lists = ""
    if children:

        def column(values: list[object]) -> str:
            return "{ " + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values) + " }"

        lists = (
            f"ChildName = {column([c[0] for c in children])}\nChildCpus = {column([c[1] for c in children])}\n"
            f"ChildMemory = {column([c[2] for c in children])}\nChildDisk = {column([1000] * len(children))}\n"
            f"ChildRemoteOwner = {column(['alice@pool'] * len(children))}\n"
        )
    return (
        f'Name = "{name}"\nMachine = "{machine}"\nSlotType = "Partitionable"\nPartitionableSlot = true\n'
        f'State = "Unclaimed"\nMyCurrentTime = {T}\nTotalSlotCpus = 8\nTotalSlotMemory = 16384\n'
        f"TotalSlotDisk = 100000.0\nCpus = {left[0]}\nMemory = {left[1]}\nDisk = {100000 - 1000 * len(children)}\n"
        f"{lists}"
    )


def dslot(name: str, cpus: int, memory: int, job: str) -> str:
    """A dynamic slot running ``job`` (its GlobalJobId) for alice."""
    return (
        f'Name = "{name}"\nMachine = "{name.split("@", 1)[1]}"\nSlotType = "Dynamic"\nDynamicSlot = true\n'
        f'State = "Claimed"\nMyCurrentTime = {T}\nCpus = {cpus}\nMemory = {memory}\nDisk = 1000\n'
        f'TotalSlotCpus = {cpus}\nTotalSlotMemory = {memory}\nGlobalJobId = "{job}"\nRemoteOwner = "alice@pool"\n'
    )


def read(tmp_path: Path, *ads: str, name: str = "status.ads") -> tuple[pd.DataFrame, pd.DataFrame, Any]:
    dump = tmp_path / name
    dump.write_text("\n".join(ads) + "\n")
    snap, report = read_status([dump])
    return snap.slots.set_index("name"), snap.allocations.set_index("name"), report


def unallocated(slot: Any) -> tuple[float, float, float]:
    return slot["unallocated_cpus"], slot["unallocated_memory"], slot["unallocated_disk"]


def test_a_listed_child_without_an_ad_is_a_released_claim(tmp_path: Path) -> None:
    """slot1_1 (2 cores, 4096 MiB) was released: the collector dropped its ad, the p-slot still
    lists it and counts it out of its own Cpus. Only slot1_2 is billed, with its job, and the
    released claim's cores and memory are unallocated again."""
    slots, allocs, _ = read(
        tmp_path,
        pslot("slot1@node1", (5, 10240), [("slot1_1@node1", 2, 4096), ("slot1_2@node1", 1, 2048)]),
        dslot("slot1_2@node1", 1, 2048, "sub#1.0#1"),
    )
    node = slots.loc["slot1@node1"]
    assert list(allocs.index) == ["slot1_2@node1"] and allocs.loc["slot1_2@node1", "job_id"] == "sub#1.0#1"
    assert not allocs["from_child_lists"].any()
    assert unallocated(node) == (8 - 1, 16384 - 2048, 100000 - 1000)
    assert node["n_dynamic"] == 1 and not node["incomplete"]


def test_a_child_advertised_before_its_p_slot_lists_it_is_allocated_once(tmp_path: Path) -> None:
    """slot1_2 (1 core, 2048 MiB) is new: its ad is there, but the p-slot's own Cpus/Memory and
    lists are from before it. It is allocated, and not also unallocated: not in the unallocated
    amounts, the canonical units of overhead, or the room an idle job is checked against."""
    slots, allocs, _ = read(
        tmp_path,
        pslot("slot1@node1", (6, 12288), [("slot1_1@node1", 2, 4096)]),
        dslot("slot1_1@node1", 2, 4096, "sub#1.0#1"),
        dslot("slot1_2@node1", 1, 2048, "sub#2.0#1"),
    )
    node = slots.loc["slot1@node1"]
    assert allocs["job_id"].to_dict() == {"slot1_1@node1": "sub#1.0#1", "slot1_2@node1": "sub#2.0#1"}
    assert unallocated(node) == (8 - 3, 16384 - 6144, 100000 - 2000) and node["n_dynamic"] == 2
    assert node["unallocated_cpus"] + allocs["cpus"].sum() == node["total_cpus"]

    snapshot, _ = read_status([tmp_path / "status.ads"])
    six_cores = pd.DataFrame(
        {"request_cpus": [6.0], "request_memory": [1024.0], "request_disk": [1.0], "request_gpus": [0.0], "count": [1]}
    )
    report = overhead_report(snapshot, ProbeConfig(), six_cores)
    # {1 core, 2048 MiB}: min(5 / 1, 10240 / 2048) = 5 CU, not the 6 of the p-slot's own Cpus
    assert report.slots["overhead_cu"].tolist() == [5] and report.slots["fits_idle"].tolist() == [False]
    bills = report.bills.set_index("name")
    assert bills["billed_cpus"].sum() == pytest.approx(8 - 5) and report.unbilled == 0


def test_a_quarantined_ad_leaves_its_node_incomplete(tmp_path: Path) -> None:
    """slot1_2@node1's ad cannot be read: node1's listed child without an ad may be it, so node1
    is incomplete (its own amounts kept, nothing billed); node2's listed child without an ad is
    a released claim as ever."""
    broken = dslot("slot1_2@node1", 1, 2048, "sub#2.0#1").replace("Cpus = 1\n", "Cpus = 1 +* 2\n")
    slots, allocs, report = read(
        tmp_path,
        pslot("slot1@node1", (5, 10240), [("slot1_1@node1", 2, 4096), ("slot1_2@node1", 1, 2048)]),
        dslot("slot1_1@node1", 2, 4096, "sub#1.0#1"),
        broken,
        pslot("slot1@node2", (7, 14336), [("slot1_1@node2", 1, 2048)]),
    )
    assert len(report.malformed) == 1
    assert slots["incomplete"].to_dict() == {"slot1@node1": True, "slot1@node2": False}
    assert unallocated(slots.loc["slot1@node1"]) == (5, 10240, 100000 - 2000)
    assert unallocated(slots.loc["slot1@node2"]) == (8, 16384, 100000)
    assert list(allocs.index) == ["slot1_1@node1"] and allocs.loc["slot1_1@node1", "job_id"] == "sub#1.0#1"
    snapshot, _ = read_status([tmp_path / "status.ads"])
    accounting = overhead_report(snapshot, ProbeConfig())
    assert accounting.unbilled == 1 and np.isnan(accounting.bills["billed_cpus"]).all()


@pytest.mark.parametrize(
    ("text", "incomplete"),
    [
        ('Name = "slot1_9@node1"\nCpus = 1 +* 2\n', {"slot1@node1": True, "slot1@node2": False}),
        ('Name = "slot1_9@node1\nMachine = "node2"\n', {"slot1@node1": False, "slot1@node2": True}),
        (
            '{"Cpus": 1 +* 2, "Name": "slot1_9@node2", "ChildName": ["slot1_1@node1"]}',
            {"slot1@node1": False, "slot1@node2": True},
        ),
        ("Cpus = 1 +* 2\n", {"slot1@node1": True, "slot1@node2": False}),
    ],
    ids=["by its name", "by its machine", "a json object", "neither: a node listing a child without an ad"],
)
def test_the_node_of_a_quarantined_ad(text: str, incomplete: dict[str, bool]) -> None:
    """The quarantined ad's node: the parent of its Name, else every slot of its Machine, else
    every node that lists a child without an ad (node1 does, node2 does not)."""
    ads = [
        pslot("slot1@node1", (5, 10240), [("slot1_1@node1", 2, 4096), ("slot1_2@node1", 1, 2048)]),
        dslot("slot1_1@node1", 2, 4096, "sub#1.0#1"),
        pslot("slot1@node2", (7, 14336), [("slot1_1@node2", 1, 2048)]),
        dslot("slot1_1@node2", 1, 2048, "sub#3.0#1"),
    ]
    parsed = [classad2.parseOne(ad, classad2.ParserType.Old) for ad in ads]
    config = ProbeConfig()
    columns, _ = columns_from_classads(parsed, slot_attrs(config.slot_reading()))
    quarantined = [Malformed("<classads>", 5, "cannot parse", text)]
    snapshot, _ = snapshot_tables(columns, config.slot_reading(), quarantined)
    slots = snapshot.slots.set_index("name")
    assert slots["incomplete"].to_dict() == incomplete


def test_a_dump_without_dynamic_slot_ads_is_billed_from_the_child_lists(tmp_path: Path) -> None:
    """A dump of p-slots only (a file of its own): the Child* lists are all it says of the jobs;
    a dump beside it with dynamic-slot ads is read from those."""
    (tmp_path / "pslots").mkdir()
    lists, _, _ = read(
        tmp_path / "pslots",
        pslot("slot1@node1", (5, 10240), [("slot1_1@node1", 2, 4096), ("slot1_2@node1", 1, 2048)]),
    )
    node = lists.loc["slot1@node1"]
    snap, _ = read_status([tmp_path / "pslots/status.ads"])
    allocs = snap.allocations.set_index("name")
    assert allocs[["cpus", "memory", "disk"]].to_dict("index") == {
        "slot1_1@node1": {"cpus": 2, "memory": 4096, "disk": 1000},
        "slot1_2@node1": {"cpus": 1, "memory": 2048, "disk": 1000},
    }
    assert allocs["from_child_lists"].all() and allocs["job_id"].isna().all() and set(allocs["user"]) == {"alice"}
    assert unallocated(node) == (5, 10240, 100000 - 2000) and node["n_dynamic"] == 2 and not node["incomplete"]

    ads_dump = tmp_path / "dslots.ads"
    ads_dump.write_text(
        pslot("slot1@node2", (5, 10240), [("slot1_1@node2", 2, 4096), ("slot1_2@node2", 1, 2048)])
        + "\n"
        + dslot("slot1_2@node2", 1, 2048, "sub#2.0#1")
        + "\n"
    )
    both, _ = read_status([tmp_path / "pslots/status.ads", ads_dump])
    per_node = both.allocations.groupby("parent")["from_child_lists"].agg(["all", "size"])
    assert per_node.to_dict("index") == {
        "slot1@node1": {"all": True, "size": 2},
        "slot1@node2": {"all": False, "size": 1},
    }


def test_static_slots_are_held_whole_or_not_at_all(tmp_path: Path) -> None:
    static = (
        f'SlotType = "Static"\nMyCurrentTime = {T}\nCpus = 4\nMemory = 8192\nDisk = 5000\nTotalSlotCpus = 4\n'
        "TotalSlotMemory = 8192\nTotalSlotDisk = 5000.0\n"
    )
    slots, allocs, _ = read(
        tmp_path,
        f'Name = "slot1@old1"\nMachine = "old1"\nState = "Claimed"\nGlobalJobId = "sub#4.0#1"\n'
        f'RemoteOwner = "bob@pool"\n{static}',
        f'Name = "slot2@old1"\nMachine = "old1"\nState = "Unclaimed"\n{static}',
        pslot("slot1@node1", (5, 10240), [("slot1_1@node1", 2, 4096), ("slot1_2@node1", 1, 2048)]),
        dslot("slot1_2@node1", 1, 2048, "sub#2.0#1"),
    )
    assert unallocated(slots.loc["slot1@old1"]) == (0, 0, 0) and unallocated(slots.loc["slot2@old1"]) == (4, 8192, 5000)
    assert slots.loc[["slot1@old1", "slot2@old1"], "n_dynamic"].tolist() == [1, 0]
    held = allocs.loc["slot1@old1"]
    assert (held["parent"], held["job_id"], held["user"], held["cpus"], held["memory"]) == (
        "slot1@old1", "sub#4.0#1", "bob", 4, 8192,
    )  # fmt: skip
    assert list(allocs.index) == ["slot1_2@node1", "slot1@old1"]


def test_a_snapshot_is_immutable_and_its_ads_read_only(condor25: Path) -> None:
    snap, _ = read_status([condor25 / "status.ads"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.ads = None  # type: ignore[misc]
    assert snap.ads is not None and not snap.ads.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        snap.ads[0] = 'Name = "someone else"'
    # a view, not a copy: the array given stays the caller's, writable
    mine = np.array(["a", "b"], dtype=object)
    frozen = Snapshot(snap.slots.head(2), snap.allocations.head(0), mine)
    mine[0] = "c"
    assert frozen.ads is not None and frozen.ads[0] == "c" and not frozen.ads.flags.writeable
    # a changed table makes a new snapshot
    changed = dataclasses.replace(snap, allocations=snap.allocations.head(0))
    assert len(snap.allocations) > 0 and len(changed.allocations) == 0 and changed.ads is snap.ads
