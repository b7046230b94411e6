"""One core, one job, one instant: stale slot ads and a job claimed by two slots, on small
startd dumps written here (the pool's own behaviour: tests/sources/test_live_unheard.py)."""

from __future__ import annotations

from pathlib import Path

import classad2

from probes.config import parse_config
from probes.pipeline.overhead import overhead_report
from probes.sources.classad import columns_from_classads
from probes.sources.settings import SlotReading
from probes.sources.status import read_status, slot_attrs, snapshot_tables
from probes.sources.unheard import DUPLICATE_JOB, PREVIOUS_RUN, STALE_DYNAMIC, UNHEARD, UNHEARD_COLUMNS

READING = SlotReading(pool="test", update_interval_s=10.0)  # stale past 20 s
T = 1_790_000_000  # the newest LastHeardFrom of the dumps (2026-09-21: before the time of reading)


def pslot(host: str, heard: int, started: int = T - 3600, cpus: int = 16, memory: int = 32768) -> str:
    return (
        f'Name = "slot1@{host}"\nMachine = "{host}"\nMyType = "Machine"\nSlotType = "Partitionable"\n'
        f'PartitionableSlot = true\nState = "Unclaimed"\nCpus = 0\nMemory = 0\nTotalSlotCpus = {cpus}\n'
        f"TotalSlotMemory = {memory}\nLastHeardFrom = {heard}\nMyCurrentTime = {heard}\n"
        f"DaemonStartTime = {started}\n"
    )


def dslot(host: str, k: int, job: str, heard: int, started: int = T - 3600, cpus: int = 2) -> str:
    return (
        f'Name = "slot1_{k}@{host}"\nMachine = "{host}"\nMyType = "Machine"\nSlotType = "Dynamic"\n'
        f'DynamicSlot = true\nState = "Claimed"\nCpus = {cpus}\nMemory = 2048\nGlobalJobId = "{job}"\n'
        f'RemoteOwner = "alice@pool"\nLastHeardFrom = {heard}\nMyCurrentTime = {heard}\n'
        f"DaemonStartTime = {started}\n"
    )


def dump(tmp_path: Path, *ads: str) -> Path:
    path = tmp_path / "status.ads"
    path.write_text("\n".join(ads) + "\n", encoding="utf-8")
    return path


def test_a_node_not_heard_from_is_reported_not_billed(tmp_path: Path) -> None:
    """cpu1 was heard from 21 s before the dump's newest ad (more than twice its 10 s interval):
    neither its p-slot nor its claim is billed; cpu2, heard from 20 s before, still is."""
    path = dump(
        tmp_path,
        pslot("cpu1", T - 21),
        dslot("cpu1", 1, "s#1.0#1", T - 21),
        pslot("cpu2", T - 20),
        dslot("cpu2", 1, "s#2.0#1", T - 20),
        pslot("gpu1", T),
    )
    snap, report = read_status([path], READING)
    assert sorted(snap.slots["name"]) == ["slot1@cpu2", "slot1@gpu1"]
    assert snap.allocations["name"].tolist() == ["slot1_1@cpu2"]
    assert list(snap.unheard.columns) == list(UNHEARD_COLUMNS)
    (node,) = snap.unheard.to_dict("records")
    assert (node["name"], node["machine"], node["since"], node["cpus"], node["memory"]) == (
        "slot1@cpu1",
        "cpu1",
        T - 21,
        16,
        32768,
    )
    assert node["source"] == str(path) and node["gpus"] == 0
    assert report.rejects[UNHEARD] == 1 and report.rejects[STALE_DYNAMIC] == 1
    # nor is it overhead: the bills hold cpu2 and gpu1 only
    bills = overhead_report(snap, parse_config({"pool": {"name": "test", "update_interval_s": 10}})).bills
    assert "slot1@cpu1" not in set(bills["parent"])


def test_each_startd_is_judged_by_its_own_update_steps(tmp_path: Path) -> None:
    """Issue 50, point 4: glideins set their own UPDATE_INTERVAL. glide1 updates every 300 s (its
    ads: 12 updates in the hour since it started), heard from 250 s ago: alive, billed, where the
    pool's 10 s alone made it unheard. cpu1 updates every 10 s (360 updates in the hour), heard
    from 25 s ago: unheard, as before; and a startd updating faster than the pool's number is
    never judged by a shorter step than the pool's."""

    def steps(ad: str, updates: int) -> str:
        return ad + f"UpdateSequenceNumber = {updates}\n"

    path = dump(
        tmp_path,
        steps(pslot("glide1", T - 250, started=T - 250 - 3300), 11),
        steps(dslot("glide1", 1, "s#1.0#1", T - 250, started=T - 250 - 3300), 11),
        steps(pslot("cpu1", T - 25, started=T - 25 - 3600), 360),
        steps(pslot("fast1", T - 15, started=T - 15 - 3600), 1800),  # every 2 s: judged by the pool's 10 s
        pslot("gpu1", T),
    )
    snap, report = read_status([path], READING)
    assert sorted(snap.slots["name"]) == ["slot1@fast1", "slot1@glide1", "slot1@gpu1"]
    assert snap.allocations["name"].tolist() == ["slot1_1@glide1"]
    assert snap.unheard["name"].tolist() == ["slot1@cpu1"] and report.rejects[UNHEARD] == 1


def test_an_ad_without_last_heard_from_is_taken_as_fresh(tmp_path: Path) -> None:
    """``condor_status -direct`` answers without LastHeardFrom: nothing to judge."""
    ads = [a.replace(f"LastHeardFrom = {T - 600}\n", "") for a in (pslot("cpu1", T - 600), pslot("cpu2", T))]
    snap, report = read_status([dump(tmp_path, *ads)], READING)
    assert len(snap.slots) == 2 and snap.unheard.empty and not report.rejects


def test_a_dynamic_slot_of_a_restarted_startd_is_not_billed(tmp_path: Path) -> None:
    """The master restarted cpu1's startd 5 s ago: its p-slot is new; slot1_1 (fresh, 8 s) is
    the previous run's and is not billed, slot1_2 is the new run's; slot1_3 missed its updates
    though its p-slot did not. Issue 51: what slot1_3 held is not known to be free (its 2 cores
    were left unallocated, billed to the others), so the node is incomplete, its unallocated cores
    what its p-slot says (0), not its size less the claim billed (14)."""
    restarted = T - 5
    path = dump(
        tmp_path,
        pslot("cpu1", T, started=restarted),
        dslot("cpu1", 1, "s#1.0#1", T - 8),
        dslot("cpu1", 2, "s#1.1#1", T, started=restarted),
        dslot("cpu1", 3, "s#1.2#1", T - 25, started=restarted),
    )
    snap, report = read_status([path], READING)
    assert snap.allocations["name"].tolist() == ["slot1_2@cpu1"]
    (slot,) = snap.slots.to_dict("records")
    assert (slot["unallocated_cpus"], slot["n_dynamic"], slot["incomplete"]) == (0, 1, True)
    assert snap.unheard.empty
    assert report.rejects[PREVIOUS_RUN] == 1 and report.rejects[STALE_DYNAMIC] == 1


def test_a_job_on_two_slots_is_billed_on_the_freshest(tmp_path: Path) -> None:
    """Job s#1.0 was rescheduled from cpu1 (its ad 15 s old, within the limit) onto gpu1 (3 s):
    billed on gpu1 only; cpu1's 2 cores are its own unallocated ones. A claim between two jobs
    (no GlobalJobId) is not a duplicate."""
    path = dump(
        tmp_path,
        pslot("cpu1", T - 15),
        dslot("cpu1", 1, "s#1.0#1", T - 15, cpus=2),
        dslot("cpu1", 2, "s#1.1#1", T - 15, cpus=4),
        pslot("gpu1", T - 3),
        dslot("gpu1", 1, "s#1.0#1", T - 3, cpus=2),
        dslot("gpu1", 2, "", T - 3).replace('GlobalJobId = ""\n', ""),
        dslot("gpu1", 3, "", T - 3).replace('GlobalJobId = ""\n', ""),
    )
    snap, report = read_status([path], READING)
    allocs = snap.allocations.set_index("name")
    assert sorted(allocs.index) == ["slot1_1@gpu1", "slot1_2@cpu1", "slot1_2@gpu1", "slot1_3@gpu1"]
    assert allocs.loc["slot1_1@gpu1", "job_id"] == "s#1.0#1"
    assert report.rejects[DUPLICATE_JOB] == 1
    job_ids = snap.allocations["job_id"].dropna()
    assert not job_ids.duplicated().any()
    slots = snap.slots.set_index("name")
    assert slots.loc["slot1@cpu1", "unallocated_cpus"] == 12  # 16 - the 4 of slot1_2


def test_live_ads_are_judged_when_the_collector_answered() -> None:
    """A live answer: the reference is ``now`` (the collector's answer), not its newest ad: both
    nodes last heard from 30 s before are unheard, and each of the same job's slots of another
    instant (two dumps) is judged apart."""
    ads = classad2.parseAds(pslot("cpu1", T) + "\n" + pslot("cpu2", T - 5), classad2.ParserType.Old)
    columns, _ = columns_from_classads(list(ads), slot_attrs(READING), origin="collector")
    later, set_aside = snapshot_tables(columns, READING, now=T + 30)
    assert set_aside.rejects == {UNHEARD: 2} and not set_aside.malformed  # returned, for the caller to add
    assert later.slots.empty and sorted(later.unheard["name"]) == ["slot1@cpu1", "slot1@cpu2"]
    assert later.unheard["since"].tolist() == [T, T - 5]
    soon, set_aside = snapshot_tables(columns, READING, now=T + 14)
    assert not set_aside.rejects
    assert soon.slots["name"].tolist() == ["slot1@cpu1", "slot1@cpu2"] and soon.unheard.empty


def test_the_same_job_at_two_instants_is_billed_at_each(tmp_path: Path) -> None:
    first = tmp_path / "a.ads"
    first.write_text(pslot("cpu1", T) + "\n" + dslot("cpu1", 1, "s#1.0#1", T) + "\n", encoding="utf-8")
    second = tmp_path / "b.ads"
    second.write_text(pslot("cpu1", T + 60) + "\n" + dslot("cpu1", 1, "s#1.0#1", T + 60) + "\n", encoding="utf-8")
    snap, report = read_status([first, second], READING)
    assert snap.allocations["observed_at"].tolist() == [T, T + 60] and not report.rejects[DUPLICATE_JOB]
